{{- define "gatehouse.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "gatehouse.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gatehouse.keyringSecret" -}}
{{ .Values.keyring.existingSecret | default (printf "%s-keyring" (include "gatehouse.fullname" .)) }}
{{- end -}}

{{- define "gatehouse.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "gatehouse.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{- define "gatehouse.installationEnv" -}}
- name: GATEHOUSE_ALLOW_HTTP_UPSTREAMS
  value: {{ .Values.installation.allowHttpUpstreams | quote }}
{{- end -}}

{{- define "gatehouse.webhookConfiguration" -}}
{{ include "gatehouse.fullname" . }}-{{ .Release.Namespace }}
{{- end -}}
