{{/* The labels that select the pods: the manifest's. */}}
{{- define "dbiolat.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{- end -}}

{{/* Every object's labels: the selector's, and who made it. */}}
{{- define "dbiolat.labels" -}}
{{ include "dbiolat.selector" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
