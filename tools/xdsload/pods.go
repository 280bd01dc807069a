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

// podIP is service i's endpoint j as first written (writeSlice's gen 0).
func podIP(i, m, j int) string { return fmt.Sprintf("10.128.%d.%d", i%250, (i/250)*m+j+1) }

// writeRolloutStep is one step of a rollout of service i: a new pod k,
// injected and running, then service i's EndpointSlice with it added.
func writeRolloutStep(st store, in *inject.Injector, i, m, k int) error {
	name := fmt.Sprintf("%s-new-%d", svcName(i), k)
	ip := fmt.Sprintf("10.129.%d.%d", k/250, k%250+1)
	p, err := injecttest.Pod(in, injecttest.Spec{Name: name, Namespace: benchNS, App: svcName(i), ServiceAccount: svcName(i),
		IP: ip, HostIP: "192.168.0.1", Node: "node-00"})
	if err != nil {
		return err
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	if err := st.put(filepath.Join("pods", name+".yaml"), string(y)); err != nil {
		return err
	}
	return writeSliceWith(st, i, m, 0, true, []endpoint{{ip: ip, pod: name}})
}

// writePods writes the pod behind each endpoint, as a cluster holds it:
// injected with the chart's defaults, running, on one of 50 nodes; one
// file (or set of applies) per service, eight services at a time.
func writePods(st store, n, m int) error {
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
				node := i*m + j
				p, err := injecttest.Pod(in, injecttest.Spec{Name: podName(i, j), Namespace: benchNS, App: svcName(i),
					ServiceAccount: svcName(i), IP: podIP(i, m, j),
					HostIP: fmt.Sprintf("192.168.0.%d", node%50+1), Node: fmt.Sprintf("node-%02d", node%50)})
				if err != nil {
					return err
				}
				y, err := yaml.Marshal(p)
				if err != nil {
					return err
				}
				b.WriteString("---\n")
				b.Write(y)
			}
			return st.put(filepath.Join("pods", svcName(i)+".yaml"), b.String())
		})
	}
	return g.Wait()
}
