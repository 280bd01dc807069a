package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// store is where the benchmark's mesh lives: a directory of YAML that
// Skiff's istiod watches (--config-dir), or a Kubernetes API server that
// Skiff's istiod and Istio's both watch.
type store interface {
	// put writes one file's worth of YAML documents, named path.
	put(path, yaml string) error
}

// fileStore writes each put as a file under dir, aside and renamed.
type fileStore struct{ dir string }

func (s fileStore) put(path, content string) error {
	return replaceFile(filepath.Join(s.dir, path), content)
}

// kubeStore server-side applies each document of a put; pods are created
// and then given their status, as in a cluster.
type kubeStore struct {
	ctx context.Context
	dyn dynamic.Interface
}

// resources are the kinds the benchmark's mesh has.
var resources = map[string]schema.GroupVersionResource{
	"v1/Service":                             {Version: "v1", Resource: "services"},
	"v1/Pod":                                 {Version: "v1", Resource: "pods"},
	"discovery.k8s.io/v1/EndpointSlice":      {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"networking.istio.io/v1/VirtualService":  {Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
	"networking.istio.io/v1/DestinationRule": {Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"},
}

func (s kubeStore) put(path, content string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(content)), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		key := obj.GetAPIVersion() + "/" + obj.GetKind()
		gvr, ok := resources[key]
		if !ok {
			return fmt.Errorf("%s: no resource for %s", path, key)
		}
		res := s.dyn.Resource(gvr).Namespace(obj.GetNamespace())
		if key == "v1/Pod" {
			if err := createPod(s.ctx, res, &obj); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		_, err := res.Apply(s.ctx, obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: "xdsload", Force: true})
		if err != nil {
			return fmt.Errorf("%s: apply %s %s/%s: %w", path, key, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// createPod creates a pod and then writes its status, as a ReplicaSet
// controller and then the pod's kubelet do.
func createPod(ctx context.Context, res dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	status := obj.Object["status"]
	created, err := res.Create(ctx, obj, metav1.CreateOptions{FieldManager: "xdsload"})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if status == nil {
		return nil
	}
	created.Object["status"] = status
	if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("write the status of pod %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
