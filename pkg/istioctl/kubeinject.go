package istioctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
)

func kubeInjectCommand() Command {
	return Command{
		Name:  "kube-inject",
		Short: "add the sidecar to the pods of Kubernetes YAML, offline (the webhook's injector)",
		Run:   kubeInject,
	}
}

// podTemplatePaths says where each workload kind keeps its pod template.
var podTemplatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
	"DeploymentConfig":      {"spec", "template"},
}

func kubeInject(ctx context.Context, env *Env, args []string) error {
	fs := flagSet("kube-inject", env)
	file := fs.StringP("filename", "f", "", "input Kubernetes YAML (- for stdin)")
	output := fs.StringP("output", "o", "", "write the injected YAML here instead of stdout")
	configFile := fs.String("injectConfigFile", "", "injector config: the istio-sidecar-injector ConfigMap's \"config\" (policy, template), or the ConfigMap itself")
	valuesFile := fs.String("valuesFile", "", "injector values (the ConfigMap's \"values\"), merged over the istiod chart's")
	meshFile := fs.String("meshConfigFile", "", "mesh config YAML (its defaultConfig is the proxy config), merged over the chart's")
	revision := fs.StringP("revision", "r", "", "control plane revision to inject for")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return &UsageError{errors.New("--filename (-f) is required")}
	}
	cfg, err := injectorConfig(*configFile, *valuesFile, *meshFile, *revision)
	if err != nil {
		return err
	}
	in, err := inject.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	var src io.Reader = env.Stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
		defer f.Close()
		src = f
	}
	var out bytes.Buffer
	if err := InjectYAML(in, src, &out, env.Stderr); err != nil {
		return err
	}
	if *output != "" {
		if err := os.WriteFile(*output, out.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	_, err = env.Stdout.Write(out.Bytes())
	return err
}

// injectorConfig reads the files of kube-inject's flags.
func injectorConfig(configFile, valuesFile, meshFile, revision string) (inject.Config, error) {
	read := func(p string) ([]byte, error) {
		if p == "" {
			return nil, nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		return b, nil
	}
	config, err := read(configFile)
	if err != nil {
		return inject.Config{}, err
	}
	values, err := read(valuesFile)
	if err != nil {
		return inject.Config{}, err
	}
	// A whole ConfigMap is accepted too: take its data keys.
	var cm corev1.ConfigMap
	if yaml.Unmarshal(config, &cm) == nil && cm.Kind == "ConfigMap" {
		config = []byte(cm.Data[inject.ConfigKey])
		if len(values) == 0 {
			values = []byte(cm.Data[inject.ValuesKey])
		}
	}
	over := map[string]any{}
	if len(bytes.TrimSpace(values)) > 0 {
		if err := yaml.Unmarshal(values, &over); err != nil {
			return inject.Config{}, fmt.Errorf("values %s: %w", valuesFile, err)
		}
	}
	if mesh, err := read(meshFile); err != nil {
		return inject.Config{}, err
	} else if len(bytes.TrimSpace(mesh)) > 0 {
		var m map[string]any
		if err := yaml.Unmarshal(mesh, &m); err != nil {
			return inject.Config{}, fmt.Errorf("mesh config %s: %w", meshFile, err)
		}
		over["meshConfig"] = m
	}
	if revision != "" {
		over["revision"] = revision
	}
	vals, err := json.Marshal(over)
	if err != nil {
		return inject.Config{}, err
	}
	return inject.ParseConfig(config, vals)
}

// InjectYAML injects every pod (and pod template of the workload kinds) in
// the YAML documents of r and writes all documents to w, others unchanged.
// Notes on pods left alone go to notes.
func InjectYAML(in *inject.Injector, r io.Reader, w, notes io.Writer) error {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	first := true
	for n := 1; ; n++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
		if obj == nil {
			n--
			continue
		}
		if err := injectObject(in, obj, notes); err != nil {
			return fmt.Errorf("document %d (%v %v): %w", n, obj["kind"], name(obj), err)
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
		if !first {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		first = false
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
}

func name(obj map[string]any) string {
	m, _ := obj["metadata"].(map[string]any)
	n, _ := m["name"].(string)
	return n
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// injectObject injects obj in place.
func injectObject(in *inject.Injector, obj map[string]any, notes io.Writer) error {
	kind := str(obj, "kind")
	meta, _ := obj["metadata"].(map[string]any)
	ns := str(meta, "namespace")
	switch {
	case kind == "List" || strings.HasSuffix(kind, "List"):
		items, _ := obj["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				if err := injectObject(in, m, notes); err != nil {
					return err
				}
			}
		}
		return nil
	case kind == "Pod" && str(obj, "apiVersion") == "v1":
		return injectPodMap(in, obj, ns, nil, notes)
	}
	path, ok := podTemplatePaths[kind]
	if !ok {
		return nil
	}
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil // no template: nothing to inject
		}
		cur = next
	}
	yes := true
	owner := &metav1.OwnerReference{APIVersion: str(obj, "apiVersion"), Kind: kind, Name: name(obj), Controller: &yes}
	return injectPodMap(in, cur, ns, owner, notes)
}

// injectPodMap injects a pod (or pod template: metadata and spec) held as a
// map, replacing its metadata and spec with the injected ones.
func injectPodMap(in *inject.Injector, m map[string]any, ns string, owner *metav1.OwnerReference, notes io.Writer) error {
	js, err := json.Marshal(map[string]any{"metadata": m["metadata"], "spec": m["spec"]})
	if err != nil {
		return err
	}
	var pod corev1.Pod
	if err := json.Unmarshal(js, &pod); err != nil {
		return fmt.Errorf("pod template: %w", err)
	}
	if owner != nil {
		pod.OwnerReferences = append(pod.OwnerReferences, *owner)
	}
	res, err := in.Inject(&pod, ns)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(notes, "warning:", w)
	}
	if !res.Injected {
		fmt.Fprintf(notes, "not injected: %s\n", res.Reason)
		return nil
	}
	if owner != nil {
		res.Pod.OwnerReferences = res.Pod.OwnerReferences[:len(res.Pod.OwnerReferences)-1]
	}
	var out map[string]any
	b, err := json.Marshal(struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     corev1.PodSpec    `json:"spec"`
	}{res.Pod.ObjectMeta, res.Pod.Spec})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	m["metadata"], m["spec"] = out["metadata"], out["spec"]
	return nil
}
