package agent_test

import corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

func nodeOf(id string) *corev3.Node { return &corev3.Node{Id: id} }
