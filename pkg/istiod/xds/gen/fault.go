package gen

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	apinet "istio.io/api/networking/v1alpha3"
)

// FaultFilter is the name of Envoy's (and grpc-go's) fault filter.
const FaultFilter = "envoy.filters.http.fault"

// faultFilter is the empty fault filter connection managers carry, so that
// routes can configure it (typed_per_filter_config), as Istio does.
func faultFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: FaultFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&faultv3.HTTPFault{})}}
}

// grpcStatus maps the gRPC status names Istio accepts to their codes.
var grpcStatus = map[string]uint32{
	"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
	"ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
	"OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

// routeFault converts a route's fault injection; nil when it injects
// nothing Envoy can (exponential delays are not supported, as in Istio).
func routeFault(in *apinet.HTTPFaultInjection) *faultv3.HTTPFault {
	if in == nil {
		return nil
	}
	out := &faultv3.HTTPFault{}
	if d := in.GetDelay(); d != nil {
		if fd, ok := d.GetHttpDelayType().(*apinet.HTTPFaultInjection_Delay_FixedDelay); ok && fd.FixedDelay != nil {
			out.Delay = &commonfaultv3.FaultDelay{
				FaultDelaySecifier: &commonfaultv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(fd.FixedDelay.AsDuration())},
			}
			if p := d.GetPercentage(); p != nil {
				out.Delay.Percentage = millionths(p)
			} else {
				out.Delay.Percentage = hundredths(uint32(d.GetPercent())) //nolint:staticcheck // Istio still reads the deprecated integer
			}
		}
	}
	if a := in.GetAbort(); a != nil {
		abort := &faultv3.FaultAbort{}
		switch e := a.GetErrorType().(type) {
		case *apinet.HTTPFaultInjection_Abort_HttpStatus:
			abort.ErrorType = &faultv3.FaultAbort_HttpStatus{HttpStatus: uint32(e.HttpStatus)}
		case *apinet.HTTPFaultInjection_Abort_GrpcStatus:
			if code, ok := grpcStatus[e.GrpcStatus]; ok {
				abort.ErrorType = &faultv3.FaultAbort_GrpcStatus{GrpcStatus: code}
			}
		}
		if abort.ErrorType != nil {
			if p := a.GetPercentage(); p != nil {
				abort.Percentage = millionths(p)
			}
			out.Abort = abort
		}
	}
	if out.Delay == nil && out.Abort == nil {
		return nil
	}
	return out
}

// millionths converts an Istio percentage (a double) as Istio does.
func millionths(p *apinet.Percent) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: uint32(p.GetValue() * 10000), Denominator: typev3.FractionalPercent_MILLION}
}

func hundredths(n uint32) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: n, Denominator: typev3.FractionalPercent_HUNDRED}
}

// runtimePercent wraps a percentage the way mirror and CORS policies take it.
func runtimePercent(p *typev3.FractionalPercent) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: p}
}
