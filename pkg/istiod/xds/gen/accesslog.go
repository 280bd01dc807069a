package gen

import (
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filelogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	reqwithoutqueryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/formatter/req_without_query/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// Istio's default access log line (accessLogEncoding TEXT), and the fields
// of its JSON one: the request, the response and why Envoy ended it, the
// bytes, the timings, and where it came from and went.
const defaultLogFormat = `[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ` +
	`%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% ` +
	`%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" ` +
	`"%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% ` +
	`%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%` + "\n"

var defaultJSONLog = map[string]string{
	"start_time": "%START_TIME%", "route_name": "%ROUTE_NAME%", "method": "%REQ(:METHOD)%",
	"path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "protocol": "%PROTOCOL%", "response_code": "%RESPONSE_CODE%",
	"response_flags": "%RESPONSE_FLAGS%", "response_code_details": "%RESPONSE_CODE_DETAILS%",
	"connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%", "bytes_received": "%BYTES_RECEIVED%",
	"bytes_sent": "%BYTES_SENT%", "duration": "%DURATION%", "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
	"x_forwarded_for": "%REQ(X-FORWARDED-FOR)%", "user_agent": "%REQ(USER-AGENT)%", "request_id": "%REQ(X-REQUEST-ID)%",
	"authority": "%REQ(:AUTHORITY)%", "upstream_host": "%UPSTREAM_HOST%", "upstream_cluster": "%UPSTREAM_CLUSTER_RAW%",
	"upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%", "downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
	"downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%", "requested_server_name": "%REQUESTED_SERVER_NAME%",
	"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
}

// accessLogs is the file access log the mesh config asks for
// (accessLogFile, in accessLogEncoding with accessLogFormat), as Istio
// 1.31 writes it on a sidecar's connection managers and TCP proxies; nil
// when it names no file. A JSON format that does not parse gives Istio's
// default fields (the mesh package warns of it).
func accessLogs(mesh *meshconfig.MeshConfig) []*accesslogv3.AccessLog {
	path := mesh.GetAccessLogFile()
	if path == "" {
		return nil
	}
	sf := &corev3.SubstitutionFormatString{}
	format := mesh.GetAccessLogFormat()
	if mesh.GetAccessLogEncoding() == meshconfig.MeshConfig_JSON {
		fields := jsonLogFormat(format)
		sf.Format = &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: fields}
		sf.JsonFormatOptions = &corev3.JsonFormatOptions{}
		for _, v := range fields.GetFields() {
			if strings.Contains(v.GetStringValue(), "%REQ_WITHOUT_QUERY") {
				sf.Formatters = reqWithoutQuery()
				break
			}
		}
	} else {
		if format == "" {
			format = defaultLogFormat
		} else if !strings.HasSuffix(format, "\n") {
			format += "\n"
		}
		sf.Format = &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: format}}}
		if strings.Contains(format, "%REQ_WITHOUT_QUERY") {
			sf.Formatters = reqWithoutQuery()
		}
	}
	fl := &filelogv3.FileAccessLog{Path: path, AccessLogFormat: &filelogv3.FileAccessLog_LogFormat{LogFormat: sf}}
	return []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(fl)}}}
}

func reqWithoutQuery() []*corev3.TypedExtensionConfig {
	return []*corev3.TypedExtensionConfig{{Name: "envoy.formatter.req_without_query", TypedConfig: mustAny(&reqwithoutqueryv3.ReqWithoutQuery{})}}
}

// jsonLogFormat is the JSON access log's fields for the mesh config's
// accessLogFormat: the object it holds, or Istio's default fields when it
// is empty or not a JSON object.
func jsonLogFormat(format string) *structpb.Struct {
	if format != "" {
		s := &structpb.Struct{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(format), s); err == nil {
			return s
		}
	}
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(defaultJSONLog))}
	for k, v := range defaultJSONLog {
		s.Fields[k] = structpb.NewStringValue(v)
	}
	return s
}

// listenerLogs are logs with the filter Istio puts on a listener's own
// access log: only connections no filter chain took (flag NR).
func listenerLogs(logs []*accesslogv3.AccessLog) []*accesslogv3.AccessLog {
	out := make([]*accesslogv3.AccessLog, 0, len(logs))
	for _, l := range logs {
		out = append(out, &accesslogv3.AccessLog{Name: l.Name, ConfigType: l.ConfigType, Filter: &accesslogv3.AccessLogFilter{
			FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"NR"}}}}})
	}
	return out
}
