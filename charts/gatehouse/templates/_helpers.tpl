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

{{- /* The operator's rules in the namespaces it works in: in its ClusterRole when it watches every
namespace, else in a Role in each of operator.watchNamespaces. */ -}}
{{- define "gatehouse.operatorNamespacedRules" -}}
# The resources it reconciles: it writes status and its own annotations, never spec
# (patch also removes the finalizer earlier versions put on connections and apps).
- apiGroups: [gatehouse.dev]
  resources: [externalconnections, dataapps, charttypes, connectiontests, projectconfigs]
  verbs: [get, list, watch, patch, update]
- apiGroups: [gatehouse.dev]
  resources:
    - externalconnections/status
    - dataapps/status
    - charttypes/status
    - connectiontests/status
    - projectconfigs/status
  verbs: [get, patch, update]
# The service API starts tests for callers it has authorised; finished tests expire.
- apiGroups: [gatehouse.dev]
  resources: [connectiontests]
  verbs: [create, delete]
# Saved samples, written once each and deleted when the service API is asked to. Samples are
# a kind of their own so that no rule here reaches ConfigMaps (kube-system's included).
- apiGroups: [gatehouse.dev]
  resources: [connectionsamples]
  verbs: [get, list, create, delete]
# Referenced credentials (read) and the apps' proxy credentials (owned).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- /* The webhook's reads, likewise. */ -}}
{{- define "gatehouse.webhookNamespacedRules" -}}
# The link policy and ConnectionTest checks read the connection; one project file per
# namespace lists the namespace's ProjectConfigs.
- apiGroups: [gatehouse.dev]
  resources: [externalconnections]
  verbs: [get]
- apiGroups: [gatehouse.dev]
  resources: [projectconfigs]
  verbs: [list]
{{- end -}}

{{- /* operator.watchNamespaces: a Role with ``rules`` (a template's name) for ``component`` in
each namespace, and its binding; called with (list $ component rules). */ -}}
{{- define "gatehouse.watchedRoles" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $rules := index . 2 -}}
{{- range $root.Values.operator.watchNamespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "gatehouse.fullname" $root }}-{{ $component }}-watched
  namespace: {{ . | quote }}
  labels: {{- include "gatehouse.labels" $root | nindent 4 }}
rules:
  {{- include $rules $root | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "gatehouse.fullname" $root }}-{{ $component }}-watched
  namespace: {{ . | quote }}
  labels: {{- include "gatehouse.labels" $root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "gatehouse.fullname" $root }}-{{ $component }}-watched
subjects:
  - kind: ServiceAccount
    name: {{ include "gatehouse.fullname" $root }}-{{ $component }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end -}}

{{- /* Spread over nodes: the values' constraints, else one per node where possible; called with
(list $ component), the component naming its values and its Pods' label. */ -}}
{{- define "gatehouse.topologySpread" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
topologySpreadConstraints:
  {{- with (index $root.Values $component).topologySpreadConstraints }}
  {{- toYaml . | nindent 2 }}
  {{- else }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app.kubernetes.io/instance: {{ $root.Release.Name | quote }}
        app.kubernetes.io/component: {{ $component }}
  {{- end }}
{{- end -}}
