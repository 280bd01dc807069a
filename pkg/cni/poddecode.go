package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// decodePod decodes a pod as the plugin's helpers write it (install-cni's
// cache file, the JSON of a trimmed core/v1 Pod; cni-lookup's answer, the
// JSON of a Pod) into a Pod as json.Unmarshal would. It reads the JSON
// generically and picks the fields out: decoding into Pod's structs makes
// encoding/json build its tables for every type and field on first use,
// which in a process that lives for one ADD costs more than the decode
// itself (about 390 thousand instructions against 110 thousand). Keys are
// matched exactly, as both write them.
func decodePod(b []byte) (*Pod, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the pod")
	}
	top, err := object(v, "pod")
	if err != nil {
		return nil, err
	}
	p := &Pod{}
	meta, err := object(top["metadata"], "metadata")
	if err != nil {
		return nil, err
	}
	m := &p.Metadata
	if m.Name, err = str(meta["name"], "metadata.name"); err != nil {
		return nil, err
	}
	if m.Namespace, err = str(meta["namespace"], "metadata.namespace"); err != nil {
		return nil, err
	}
	if m.UID, err = str(meta["uid"], "metadata.uid"); err != nil {
		return nil, err
	}
	if m.Labels, err = strMap(meta["labels"], "metadata.labels"); err != nil {
		return nil, err
	}
	if m.Annotations, err = strMap(meta["annotations"], "metadata.annotations"); err != nil {
		return nil, err
	}
	spec, err := object(top["spec"], "spec")
	if err != nil {
		return nil, err
	}
	if p.Spec.InitContainers, err = containers(spec["initContainers"], "spec.initContainers"); err != nil {
		return nil, err
	}
	if p.Spec.Containers, err = containers(spec["containers"], "spec.containers"); err != nil {
		return nil, err
	}
	return p, nil
}

// object is v as a JSON object; null and absent are an empty one.
func object(v any, what string) (map[string]any, error) {
	switch o := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return o, nil
	}
	return nil, fmt.Errorf("%s: %T, want an object", what, v)
}

// array is v as a JSON array; null and absent are nil.
func array(v any, what string) ([]any, error) {
	switch a := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return a, nil
	}
	return nil, fmt.Errorf("%s: %T, want an array", what, v)
}

// str is v as a JSON string; null and absent are "".
func str(v any, what string) (string, error) {
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		return s, nil
	}
	return "", fmt.Errorf("%s: %T, want a string", what, v)
}

// strMap is v as an object of strings; null and absent are nil.
func strMap(v any, what string) (map[string]string, error) {
	o, err := object(v, what)
	if err != nil || o == nil {
		return nil, err
	}
	out := make(map[string]string, len(o))
	for k, e := range o {
		if out[k], err = str(e, what+"."+k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// list is v as a JSON array of what elem reads from each element; null
// and absent are nil.
func list[T any](v any, what string, elem func(any) (T, error)) ([]T, error) {
	a, err := array(v, what)
	if err != nil || a == nil {
		return nil, err
	}
	out := make([]T, len(a))
	for i, e := range a {
		if out[i], err = elem(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// strSlice is v as an array of strings; null and absent are nil.
func strSlice(v any, what string) ([]string, error) {
	return list(v, what, func(e any) (string, error) { return str(e, what) })
}

// int64Ptr is v as a JSON integer; null and absent are nil.
func int64Ptr(v any, what string) (*int64, error) {
	switch n := v.(type) {
	case nil:
		return nil, nil
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return &i, nil
	}
	return nil, fmt.Errorf("%s: %T, want an integer", what, v)
}

// containers is v as the containers of a pod spec.
func containers(v any, what string) ([]Container, error) {
	return list(v, what, func(e any) (Container, error) { return container(e, what) })
}

// container is v as one container of a pod spec.
func container(v any, what string) (Container, error) {
	var ct Container
	c, err := object(v, what)
	if err != nil {
		return ct, err
	}
	if ct.Name, err = str(c["name"], what+".name"); err != nil {
		return ct, err
	}
	if ct.Args, err = strSlice(c["args"], what+".args"); err != nil {
		return ct, err
	}
	if ct.Env, err = list(c["env"], what+".env", func(e any) (EnvVar, error) { return envVar(e, what+".env") }); err != nil {
		return ct, err
	}
	sc, err := object(c["securityContext"], what+".securityContext")
	if err != nil || sc == nil {
		return ct, err
	}
	ct.SecurityContext = &SecurityContext{}
	if ct.SecurityContext.RunAsUser, err = int64Ptr(sc["runAsUser"], what+".securityContext.runAsUser"); err != nil {
		return ct, err
	}
	ct.SecurityContext.RunAsGroup, err = int64Ptr(sc["runAsGroup"], what+".securityContext.runAsGroup")
	return ct, err
}

// envVar is v as a container's environment variable.
func envVar(v any, what string) (EnvVar, error) {
	var ev EnvVar
	o, err := object(v, what)
	if err != nil {
		return ev, err
	}
	if ev.Name, err = str(o["name"], what+".name"); err != nil {
		return ev, err
	}
	ev.Value, err = str(o["value"], what+".value")
	return ev, err
}
