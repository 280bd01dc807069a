{{/* The revision suffix of names: "" for the default revision, "-REV" otherwise. */}}
{{- define "istiod.suffix" -}}
{{- if and .Values.revision (ne .Values.revision "default") -}}-{{ .Values.revision }}{{- end -}}
{{- end -}}
{{- define "istiod.name" -}}istiod{{ include "istiod.suffix" . }}{{- end -}}
{{- define "istiod.rev" -}}{{ default "default" .Values.revision }}{{- end -}}
{{- define "istiod.image" -}}
{{- if contains "/" .Values.pilot.image -}}{{ .Values.pilot.image }}{{- else -}}{{ .Values.global.hub }}/{{ .Values.pilot.image }}:{{ .Values.global.tag }}{{- end -}}
{{- end -}}
{{- define "istiod.labels" -}}
app: istiod
istio: pilot
istio.io/rev: {{ include "istiod.rev" . }}
app.kubernetes.io/name: istiod
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{/* The webhooks' client config: the istiod Service on 443, or a URL. */}}
{{- define "istiod.clientConfig" -}}
{{- if .Values.webhooks.url }}
url: {{ printf "%s%s" .Values.webhooks.url .path | quote }}
{{- else }}
service:
  name: {{ include "istiod.name" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path | quote }}
  port: 443
{{- end }}
{{- if .Values.webhooks.caBundle }}
caBundle: {{ .Values.webhooks.caBundle | quote }}
{{- end }}
{{- end -}}
