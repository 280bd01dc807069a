package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/remotecommand"
)

// Kube is what the flow does through the API server.
type Kube struct {
	Config *rest.Config
	Client kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewKube returns a Kube for a cluster-admin config.
func NewKube(cfg *rest.Config) (*Kube, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{Config: cfg, Client: c, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// Apply server-side-applies every object of a multi-document YAML stream.
func (k *Kube) Apply(ctx context.Context, manifest []byte) error {
	k.mapper.Reset() // CRDs may have been installed since the last call
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := k.applyOne(ctx, &obj); err != nil {
			return err
		}
	}
}

func (k *Kube) applyOne(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var r dynamic.ResourceInterface = k.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		r = k.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	if _, err := r.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "skiff-cluster", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// Resource returns the dynamic client for a group/version/resource.
func (k *Kube) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return k.dyn.Resource(gvr)
}

// Exec runs a command in a pod's container and returns its stdout; stderr
// is in the error.
func (k *Kube) Exec(ctx context.Context, ns, pod, container string, cmd ...string) (string, error) {
	req := k.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(k.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		return out.String(), fmt.Errorf("exec %s in %s/%s: %w: %s", strings.Join(cmd, " "), ns, pod, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Logs returns a container's log.
func (k *Kube) Logs(ctx context.Context, ns, pod, container string) (string, error) {
	b, err := k.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return string(b), err
}

// Lines splits output into trimmed non-empty lines.
func Lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}
