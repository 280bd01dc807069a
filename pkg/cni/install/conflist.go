// Package install is the CNI node agent's installer: it puts the plugin
// binary and a kubeconfig on the node, chains the plugin into the node's CNI
// configuration, keeps both intact while it runs, and removes them when it
// stops, leaving the configuration byte for byte as it found it. Run also
// runs the race repair controller (package repair) beside it.
package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/cni"
)

// PluginType is the "type" of our entry in the conflist.
const PluginType = "istio-cni"

// FindConfFile returns the lexically first CNI configuration file in dir
// (.conf, .conflist or .json), which is the one the runtime uses.
func FindConfFile(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read CNI net dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if !e.IsDir() && (ext == ".conf" || ext == ".conflist" || ext == ".json") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no CNI configuration in %s yet", dir)
	}
	slices.Sort(names)
	return filepath.Join(dir, names[0]), nil
}

// conflist is a decoded configuration list; plugin entries stay generic so
// other components' fields survive a rewrite untouched.
type conflist map[string]any

// parseConf decodes a .conf or .conflist file as a conflist: a single
// network configuration is wrapped into a list of one plugin.
func parseConf(data []byte) (conflist, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse CNI configuration: %w", err)
	}
	if _, ok := raw["plugins"]; ok {
		if _, ok := raw["plugins"].([]any); !ok {
			return nil, errors.New(`CNI configuration: "plugins" is not a list`)
		}
		return raw, nil
	}
	if _, ok := raw["type"]; !ok {
		return nil, errors.New(`CNI configuration has neither "plugins" nor "type"`)
	}
	list := conflist{"cniVersion": raw["cniVersion"], "name": raw["name"]}
	delete(raw, "cniVersion")
	delete(raw, "name")
	list["plugins"] = []any{raw}
	return list, nil
}

func (c conflist) plugins() []any { p, _ := c["plugins"].([]any); return p }

func isOurs(p any) bool {
	m, ok := p.(map[string]any)
	return ok && m["type"] == PluginType
}

// Check reports why the configuration does not hold exactly one intact copy
// of entry as its last plugin, or "" when it does. The whole entry is
// compared, not just its type: Istio misses mangled entries.
func Check(data []byte, entry cni.Config) string {
	c, err := parseConf(data)
	if err != nil {
		return err.Error()
	}
	plugins := c.plugins()
	n := 0
	for _, p := range plugins {
		if isOurs(p) {
			n++
		}
	}
	switch {
	case n == 0:
		return "our plugin entry is missing"
	case n > 1:
		return fmt.Sprintf("our plugin entry appears %d times", n)
	case !isOurs(plugins[len(plugins)-1]):
		return "our plugin entry is not last"
	case !reflect.DeepEqual(normalise(plugins[len(plugins)-1]), normalise(entry)):
		return "our plugin entry was changed"
	}
	return ""
}

// normalise round-trips through JSON so numbers and nested values compare alike.
func normalise(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// Insert returns the configuration as a conflist with every copy of our
// entry removed and entry appended last. It edits the text: every byte
// outside our entry stays as it was, so Remove gives back a conflist
// exactly as it was before Insert.
func Insert(data []byte, entry cni.Config) ([]byte, error) {
	list, err := asList(data)
	if err != nil {
		return nil, err
	}
	if list, _, err = Remove(list); err != nil {
		return nil, err
	}
	l, err := scan(list)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return nil, fmt.Errorf("encode our entry: %w", err)
	}
	out, err := l.appendPlugin(list, raw)
	if err == nil && !json.Valid(out) {
		err = errors.New("CNI configuration: adding our entry gave invalid JSON")
	}
	return out, err
}

// Remove returns the configuration without any copy of our entry, and
// whether it had one. Only our entries and their separators are cut; the
// rest of the bytes are left as they were.
func Remove(data []byte) ([]byte, bool, error) {
	had := false
	for {
		l, err := scan(data)
		if err != nil {
			return nil, false, fmt.Errorf("parse CNI configuration: %w", err)
		}
		k := slices.IndexFunc(l.plugins, func(s span) bool { return pluginType(data[s.start:s.end]) == PluginType })
		if k < 0 {
			return data, had, nil
		}
		data, had = l.cut(data, k), true
	}
}

// asList returns a conflist as it is, and a single network configuration
// (.conf) as a conflist of one plugin: its cniVersion and name move to the
// list, its other keys stay in their order.
func asList(data []byte) ([]byte, error) {
	l, err := scan(data)
	if err != nil {
		return nil, fmt.Errorf("parse CNI configuration: %w", err)
	}
	if l.hasPlugins {
		return data, nil
	}
	if !slices.ContainsFunc(l.members, func(m member) bool { return m.key == "type" }) {
		return nil, errors.New(`CNI configuration has neither "plugins" nor "type"`)
	}
	var top, plugin []string
	for _, m := range l.members {
		k, _ := json.Marshal(m.key)
		kv := string(k) + ":" + string(data[m.value.start:m.value.end])
		if m.key == "cniVersion" || m.key == "name" {
			top = append(top, kv)
		} else {
			plugin = append(plugin, kv)
		}
	}
	compact := "{" + strings.Join(append(top, `"plugins":[{`+strings.Join(plugin, ",")+"}]"), ",") + "}"
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(compact), "", "  "); err != nil {
		return nil, fmt.Errorf("convert to a conflist: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// ConflistPath is where a configuration file's conflist form lives: a .conf
// (or .json) file is replaced by a .conflist of the same base name.
func ConflistPath(path string) string {
	if strings.HasSuffix(path, ".conflist") {
		return path
	}
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".conflist"
}
