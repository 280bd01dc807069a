// Package repair is the CNI node agent's race repair: a pod that started on
// the node before the CNI plugin was chained in has no traffic capture, so
// its injected istio-validation init container fails (istio-iptables exits
// 126). The controller watches the pods of its own node, finds those, and
// deletes them (their owner recreates them, now with capture) or labels
// them, as Istio's repair controller does. Which pod is broken and what is
// done about it (Config, Broken, Repairer) is apart from how the pods are
// watched (Run) and changed (Pods, with a recording fake in repairtest).
package repair
