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

// strSlice is v as an array of strings; null and absent are nil.
func strSlice(v any, what string) ([]string, error) {
	a, err := array(v, what)
	if err != nil || a == nil {
		return nil, err
	}
	out := make([]string, len(a))
	for i, e := range a {
		if out[i], err = str(e, what); err != nil {
			return nil, err
		}
	}
	return out, nil
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
	a, err := array(v, what)
	if err != nil || a == nil {
		return nil, err
	}
	out := make([]Container, len(a))
	for i, e := range a {
		c, err := object(e, what)
		if err != nil {
			return nil, err
		}
		ct := &out[i]
		if ct.Name, err = str(c["name"], what+".name"); err != nil {
			return nil, err
		}
		if ct.Args, err = strSlice(c["args"], what+".args"); err != nil {
			return nil, err
		}
		env, err := array(c["env"], what+".env")
		if err != nil {
			return nil, err
		}
		if env != nil {
			ct.Env = make([]EnvVar, len(env))
		}
		for j, ev := range env {
			o, err := object(ev, what+".env")
			if err != nil {
				return nil, err
			}
			if ct.Env[j].Name, err = str(o["name"], what+".env.name"); err != nil {
				return nil, err
			}
			if ct.Env[j].Value, err = str(o["value"], what+".env.value"); err != nil {
				return nil, err
			}
		}
		sc, err := object(c["securityContext"], what+".securityContext")
		if err != nil {
			return nil, err
		}
		if sc != nil {
			ct.SecurityContext = &SecurityContext{}
			if ct.SecurityContext.RunAsUser, err = int64Ptr(sc["runAsUser"], what+".securityContext.runAsUser"); err != nil {
				return nil, err
			}
			if ct.SecurityContext.RunAsGroup, err = int64Ptr(sc["runAsGroup"], what+".securityContext.runAsGroup"); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
