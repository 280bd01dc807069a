package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// ProxyOf returns the proxy type of a pod: its injection templates
// (model.InjectTemplatesAnnotation) grpc-agent and grpc-simple make it a
// proxyless gRPC workload.
func ProxyOf(p *model.Pod) Proxy {
	for t := range strings.SplitSeq(p.Templates, ",") {
		if t = strings.TrimSpace(t); t == "grpc-agent" || t == "grpc-simple" {
			return Proxyless
		}
	}
	return Envoy
}

// Analyze runs every analyzer on what istiod reads.
func Analyze(in *model.Inputs) []Message {
	return AnalyzeSet(&Set{Inputs: *in})
}

// AnalyzeSet runs every analyzer on s and returns the messages sorted by
// resource, then field, then code.
func AnalyzeSet(s *Set) []Message {
	var out []Message
	out = append(out, s.support()...)
	out = append(out, s.unread()...)
	out = append(out, s.hosts()...)
	out = append(out, s.conflicts()...)
	out = append(out, s.gateways()...)
	for i := range out {
		out[i].Origin = s.originOf(out[i])
	}
	Sort(out)
	return out
}

// Sort orders messages by resource kind, namespace, name, then field and code.
func Sort(ms []Message) {
	slices.SortStableFunc(ms, func(a, b Message) int {
		return cmp.Or(
			cmp.Compare(a.Resource.Kind, b.Resource.Kind),
			cmp.Compare(a.Resource.Namespace, b.Resource.Namespace),
			cmp.Compare(a.Resource.Name, b.Resource.Name),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Type.Code, b.Type.Code),
			cmp.Compare(a.Text, b.Text),
		)
	})
}

// workloads counts the proxy types of the pods, mesh-wide and by
// namespace, for the support table.
type workloads struct {
	all  map[Proxy]int
	byNS map[string][]*model.Pod
}

func (s *Set) workloads() *workloads {
	w := &workloads{all: map[Proxy]int{}, byNS: map[string][]*model.Pod{}}
	for _, p := range s.Pods {
		w.all[ProxyOf(p)]++
		w.byNS[p.Namespace] = append(w.byNS[p.Namespace], p)
	}
	return w
}

// proxies returns the proxy types of the pods o applies to, with their
// counts; with no such pod, proxyless (the stricter assumption: it honours
// less).
func (w *workloads) proxies(o object) map[Proxy]int {
	out := map[Proxy]int{}
	switch {
	case o.key.Namespace == RootNamespace && len(o.selector) == 0, !o.scoped && len(o.selector) == 0:
		for p, n := range w.all {
			out[p] = n
		}
	default:
		var sel labels.Selector
		if len(o.selector) > 0 {
			sel = labels.SelectorFromSet(o.selector)
		}
		pods := w.byNS[o.key.Namespace]
		if o.key.Namespace == RootNamespace {
			pods = nil
			for _, ps := range w.byNS {
				pods = append(pods, ps...)
			}
		}
		for _, p := range pods {
			if sel == nil || sel.Matches(labels.Set(p.Labels)) {
				out[ProxyOf(p)]++
			}
		}
	}
	if len(out) == 0 {
		out[Proxyless] = 0
	}
	return out
}

func describe(p Proxy, n int) string {
	switch {
	case n == 0:
		return p.String() + " (assumed: no workload known)"
	case n == 1:
		return p.String() + " (1 pod)"
	}
	return fmt.Sprintf("%s (%d pods)", p, n)
}

// support applies the support table.
func (s *Set) support() []Message {
	var out []Message
	w := s.workloads()
	for _, o := range s.objects() {
		present := w.proxies(o)
		for _, r := range Untranslated {
			n, ok := present[r.Proxy]
			if r.Kind != o.key.Kind || !ok {
				continue
			}
			for _, h := range find(o.spec.ProtoReflect(), r.Field, r.Values) {
				what := h.path
				if h.path == "spec" {
					what = string(o.key.Kind)
				}
				if h.value != "" {
					what += " " + h.value
				}
				m := newMessage(UntranslatedField, o.key, h.path, what, describe(r.Proxy, n), r.Effect)
				m.Level = r.Level
				out = append(out, m)
			}
		}
	}
	return out
}

// unread reports each object of a kind istiod does not read.
func (s *Set) unread() []Message {
	var out []Message
	for _, k := range s.Unread {
		effect, ok := UnreadKinds[k.Kind]
		if !ok {
			effect = "it has no effect on any proxy"
		}
		out = append(out, newMessage(UnreadKind, k, "", k.Kind, effect))
	}
	return out
}
