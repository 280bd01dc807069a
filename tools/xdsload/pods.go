package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/injecttest"
)

func podName(i, j int) string { return fmt.Sprintf("%s-%d", svcName(i), j) }

// podYAML is the YAML of service i's pod name at ip on node n of 50,
// injected by in and running.
func podYAML(in *inject.Injector, sp spread, i int, name, ip string, n int) (string, error) {
	p, err := injecttest.Pod(in, injecttest.Spec{Name: name, Namespace: sp.ns(i), App: svcName(i), ServiceAccount: svcName(i),
		IP: ip, HostIP: fmt.Sprintf("192.168.0.%d", n%50+1), Node: fmt.Sprintf("node-%02d", n%50)})
	if err != nil {
		return "", err
	}
	y, err := yaml.Marshal(p)
	return string(y), err
}

// writeRolloutStep is one step of a rollout of service i: a new pod k,
// injected and running, then service i's EndpointSlice with it added.
func writeRolloutStep(st store, in *inject.Injector, sp spread, i, m, k int) error {
	name := fmt.Sprintf("%s-new-%d", svcName(i), k)
	ip := fmt.Sprintf("10.129.%d.%d", k/250, k%250+1)
	y, err := podYAML(in, sp, i, name, ip, 0)
	if err != nil {
		return err
	}
	if err := st.put(filepath.Join("pods", name+".yaml"), y); err != nil {
		return err
	}
	return writeSliceWith(st, sp, i, m, 0, true, []endpoint{{ip: ip, pod: name}})
}

// writePods writes the pod behind each endpoint, as a cluster holds it:
// injected with the chart's defaults, running, on one of 50 nodes; one
// file (or set of applies) per service, eight services at a time.
func writePods(st store, sp spread, n, m int) error {
	in, err := injecttest.Injector()
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			var b strings.Builder
			for j := range m {
				y, err := podYAML(in, sp, i, podName(i, j), endpointIP(i, m, j, 0), i*m+j)
				if err != nil {
					return err
				}
				b.WriteString("---\n")
				b.WriteString(y)
			}
			return st.put(filepath.Join("pods", svcName(i)+".yaml"), b.String())
		})
	}
	return g.Wait()
}
