package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"sigs.k8s.io/yaml"
)

// print writes the messages: one line each (log), or a JSON or YAML list.
func print(w io.Writer, format string, ms []analysis.Message) error {
	switch format {
	case "json", "yaml":
		if ms == nil {
			ms = []analysis.Message{}
		}
		b, err := json.MarshalIndent(ms, "", "\t")
		if err != nil {
			return err
		}
		if format == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintln(w, strings.TrimRight(string(b), "\n"))
		return err
	}
	lines := make([]string, len(ms))
	for i, m := range ms {
		lines[i] = m.String()
	}
	// Istio prints the joined messages and a newline: an empty line when
	// there are none.
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// readPath reads a file, a directory (recursively) or - (stdin) into s.
// It returns the names read, parse errors, and an error for a path that
// cannot be read.
func readPath(env *Env, s *analysis.Set, path, ns string) ([]string, []error, error) {
	if path == "-" {
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return nil, nil, fmt.Errorf("read stdin: %w", err)
		}
		return []string{"-"}, s.AddYAML("-", b, ns), nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var errs []error
	add := func(p string) error {
		if !validExt(p) {
			fmt.Fprintf(env.Stderr, "Skipping file %v, recognized file extensions are: [.json .yaml .yml]\n", p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		names = append(names, p)
		errs = append(errs, s.AddYAML(p, b, ns)...)
		return nil
	}
	if !fi.IsDir() {
		return names, errs, add(path)
	}
	err = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return add(p)
	})
	return names, errs, err
}

func validExt(p string) bool {
	return slices.Contains([]string{".json", ".yaml", ".yml"}, filepath.Ext(p))
}
