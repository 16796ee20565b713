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
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "gatehouse.keyringSecret" -}}
{{ .Values.keyring.existingSecret | default (printf "%s-keyring" (include "gatehouse.fullname" .)) }}
{{- end -}}

{{- define "gatehouse.podSecurity" -}}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{- define "gatehouse.containerSecurity" -}}
securityContext: {{- toYaml .Values.securityContext | nindent 2 }}
{{- end -}}

{{- /* Scheduling and pod extras shared by both Deployments; called with (list $ .Values.<program>). */ -}}
{{- define "gatehouse.podExtras" -}}
{{- $root := index . 0 -}}
{{- $values := index . 1 -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gatehouse.installationEnv" -}}
- name: GATEHOUSE_ALLOW_HTTP_UPSTREAMS
  value: {{ .Values.installation.allowHttpUpstreams | quote }}
{{- end -}}

{{- define "gatehouse.webhookConfiguration" -}}
{{ include "gatehouse.fullname" . }}-{{ .Release.Namespace }}
{{- end -}}

{{- /* The controller's Lease, and the value of the label its leader puts on its own Pod. */ -}}
{{- define "gatehouse.leaderLease" -}}
{{ include "gatehouse.fullname" . }}-operator
{{- end -}}
