{{- define "gatehouse.name" -}}
{{ default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" }}
{{- end -}}

{{- /* Every object's name starts with it (50 characters: room for the longest suffix). */ -}}
{{- define "gatehouse.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else -}}
{{- $name := include "gatehouse.name" . -}}
{{- if contains $name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* The ServiceAccount a component runs as; called with (list $ component). Made by the chart
unless serviceAccount.create is false; the chart's RBAC binds whichever it is. */ -}}
{{- define "gatehouse.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $account := (index $root.Values $component).serviceAccount -}}
{{- if $account.create -}}
{{ $account.name | default (printf "%s-%s" (include "gatehouse.fullname" $root) $component) }}
{{- else if $account.name -}}
{{ $account.name }}
{{- else if eq $component "proxy" -}}
{{- /* The proxy's account holds no rights and its Pods mount no token. */ -}}
default
{{- else -}}
{{- /* Binding the operator's or webhook's rights to "default" would give them to every Pod of
the namespace that names no account. */ -}}
{{- fail (printf "%s.serviceAccount.name is required when %s.serviceAccount.create is false: the chart binds its RBAC to that account" $component $component) -}}
{{- end -}}
{{- end -}}

{{- /* A component's ServiceAccount, when the chart makes it; called with (list $ component). */ -}}
{{- define "gatehouse.serviceAccount" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $account := (index $root.Values $component).serviceAccount -}}
{{- if $account.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "gatehouse.serviceAccountName" . }}
  labels: {{- include "gatehouse.labels" $root | nindent 4 }}
  {{- with $account.annotations }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- if eq $component "proxy" }}
# The proxy needs no Kubernetes API access at all.
automountServiceAccountToken: false
{{- end }}
---
{{- end }}
{{- end -}}

{{/* An image reference from one of the image values (image, proxy.image): (list $root $image). */}}
{{- define "gatehouse.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "gatehouse.keyringSecret" -}}
{{ .Values.keyring.existingSecret | default (printf "%s-keyring" (include "gatehouse.fullname" .)) }}
{{- end -}}

{{- /* The Secret of the API server's client certificate for the webhook, when the webhook
makes it (client authentication on, no CA of the installer's): "true" for that case, and its
name. */ -}}
{{- define "gatehouse.webhookMakesClientCA" -}}
{{- $clientAuth := .Values.webhook.clientAuthentication -}}
{{- if and $clientAuth.enabled (not $clientAuth.caBundle) (not $clientAuth.existingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "gatehouse.webhookClientSecret" -}}
{{ include "gatehouse.fullname" . }}-webhook-client
{{- end -}}

{{- define "gatehouse.sealingKeysSecret" -}}
{{ .Values.sealingKeys.existingSecret | default (printf "%s-sealing-keys" (include "gatehouse.fullname" .)) }}
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
# Neither program reads the Service environment variables (a namespace with many Services would
# give each Pod thousands of them).
enableServiceLinks: false
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
# Sign-in requests: the operator answers each in status and deletes it once used or late.
- apiGroups: [gatehouse.dev]
  resources: [signinrequests]
  verbs: [get, list, watch, patch, update, delete]
- apiGroups: [gatehouse.dev]
  resources: [signinrequests/status]
  verbs: [get, patch, update]
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
# A user's waiting sign-in requests are counted, so no one piles them up.
- apiGroups: [gatehouse.dev]
  resources: [signinrequests]
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
    name: {{ include "gatehouse.serviceAccountName" (list $root $component) }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end -}}

{{- /* Spread over nodes: the values' constraints, else one per node where possible; called with
(list $ component), the component naming its values and its Pods' label. */ -}}
{{- define "gatehouse.topologySpread" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- /* This release's Pods of the component: a constraint without a labelSelector gets it, so
that other releases' Pods never count in its skew. */ -}}
{{- $own := dict "matchLabels" (dict "app.kubernetes.io/instance" $root.Release.Name "app.kubernetes.io/component" $component) -}}
topologySpreadConstraints:
  {{- range (index $root.Values $component).topologySpreadConstraints }}
  - {{ toYaml (omit . "labelSelector") | nindent 4 | trim }}
    labelSelector: {{- toYaml (.labelSelector | default $own) | nindent 6 }}
  {{- else }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {{- toYaml $own | nindent 6 }}
  {{- end }}
{{- end -}}

{{- /* The shared store. "true" when the chart runs its own (store.enabled, no external URL). */ -}}
{{- define "gatehouse.storeBundled" -}}
{{- if and .Values.store.enabled (not .Values.store.external.url) -}}true{{- end -}}
{{- end -}}

{{- /* The bundled store's name: its Deployment, Service, ConfigMap and NetworkPolicy, and its
password Secret, which the operator makes and the store and the proxies mount. */ -}}
{{- define "gatehouse.storeName" -}}
{{ include "gatehouse.fullname" . }}-store
{{- end -}}

{{- /* The store's values checked together, where the schema cannot. */ -}}
{{- define "gatehouse.storeChecks" -}}
{{- $external := .Values.store.external -}}
{{- if and $external.url (not .Values.store.enabled) -}}
{{- fail "store.external.url is set but store.enabled is false: enable the store, or leave the URL empty to run without one" -}}
{{- end -}}
{{- if and (not $external.url) (or $external.passwordSecret.name $external.ca.configMap $external.ca.secret) -}}
{{- fail "store.external.passwordSecret and store.external.ca need store.external.url: the bundled store's password is the operator's Secret" -}}
{{- end -}}
{{- if and $external.ca.configMap $external.ca.secret -}}
{{- fail "store.external.ca: set configMap or secret, not both" -}}
{{- end -}}
{{- if and (or $external.ca.configMap $external.ca.secret) (not (hasPrefix "rediss://" $external.url)) -}}
{{- fail "store.external.ca needs a rediss:// URL: a CA verifies TLS, and redis:// has none" -}}
{{- end -}}
{{- end -}}

{{- /* The proxies' store settings, as YAML lists (empty without a store): called with
(list $ "env"|"mounts"|"volumes"). */ -}}
{{- define "gatehouse.storeProxy" -}}
{{- $root := index . 0 -}}
{{- $what := index . 1 -}}
{{- include "gatehouse.storeChecks" $root -}}
{{- $store := $root.Values.store -}}
{{- $external := $store.external -}}
{{- $password := or (include "gatehouse.storeBundled" $root) $external.passwordSecret.name -}}
{{- $ca := or $external.ca.configMap $external.ca.secret -}}
{{- $items := list -}}
{{- if $store.enabled -}}
{{- if eq $what "env" -}}
{{- $url := $external.url | default (printf "redis://%s.%s.svc:6379/0" (include "gatehouse.storeName" $root) $root.Release.Namespace) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_URL" "value" $url) -}}
{{- if $password -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_PASSWORD_FILE" "value" "/etc/gatehouse/store-password/password") -}}
{{- end -}}
{{- if $ca -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_CA_FILE" "value" (printf "/etc/gatehouse/store-ca/%s" $external.ca.key)) -}}
{{- end -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_DEADLINE_SECONDS" "value" (toString $store.deadlineSeconds)) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_NAMESPACE_BYTES" "value" ($store.namespaceShare.bytes | int64 | toString)) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_NAMESPACE_KEYS" "value" ($store.namespaceShare.keys | int64 | toString)) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_CACHE_BYTES" "value" ($store.cacheShare.bytes | int64 | toString)) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_CACHE_KEYS" "value" ($store.cacheShare.keys | int64 | toString)) -}}
{{- $items = append $items (dict "name" "GATEHOUSE_STORE_RESERVE" "value" (toString $store.reserve)) -}}
{{- else if eq $what "mounts" -}}
{{- if $password -}}
{{- $items = append $items (dict "name" "store-password" "mountPath" "/etc/gatehouse/store-password" "readOnly" true) -}}
{{- end -}}
{{- if $ca -}}
{{- $items = append $items (dict "name" "store-ca" "mountPath" "/etc/gatehouse/store-ca" "readOnly" true) -}}
{{- end -}}
{{- else -}}
{{- if $password -}}
{{- $secret := $external.passwordSecret.name | default (include "gatehouse.storeName" $root) -}}
{{- $key := ternary "password" $external.passwordSecret.key (empty $external.passwordSecret.name) -}}
{{- $items = append $items (dict "name" "store-password" "secret" (dict "secretName" $secret "items" (list (dict "key" $key "path" "password")))) -}}
{{- end -}}
{{- if $external.ca.configMap -}}
{{- $items = append $items (dict "name" "store-ca" "configMap" (dict "name" $external.ca.configMap)) -}}
{{- else if $external.ca.secret -}}
{{- $items = append $items (dict "name" "store-ca" "secret" (dict "secretName" $external.ca.secret)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $items }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
The trusted issuers of viewer assertions as the proxy reads them (GATEHOUSE_VIEWER_ISSUERS): a
keysSecret becomes the file it is mounted as (gatehouse.viewerKeys).
*/}}
{{- define "gatehouse.viewerIssuers" -}}
{{- $issuers := list -}}
{{- range $index, $issuer := .Values.viewers.issuers -}}
{{- $entry := dict "issuer" $issuer.issuer "audience" $issuer.audience -}}
{{- if $issuer.keysSecret -}}
{{- $_ := set $entry "keysFile" (printf "/etc/gatehouse/viewer-keys/%d/%s" $index $issuer.keysSecret.key) -}}
{{- else -}}
{{- $_ := set $entry "jwksURL" $issuer.jwksURL -}}
{{- end -}}
{{- $issuers = append $issuers $entry -}}
{{- end -}}
{{- toJson $issuers -}}
{{- end -}}

{{/*
The issuers' key Secrets, mounted one folder each: "mounts" or "volumes".
*/}}
{{- define "gatehouse.viewerKeys" -}}
{{- $root := index . 0 -}}
{{- $part := index . 1 -}}
{{- range $index, $issuer := $root.Values.viewers.issuers -}}
{{- if $issuer.keysSecret }}
{{- if eq $part "mounts" }}
- {name: viewer-keys-{{ $index }}, mountPath: /etc/gatehouse/viewer-keys/{{ $index }}, readOnly: true}
{{- else }}
- name: viewer-keys-{{ $index }}
  secret:
    secretName: {{ $issuer.keysSecret.name }}
    items: [{key: {{ $issuer.keysSecret.key | quote }}, path: {{ $issuer.keysSecret.key | quote }}}]
{{- end }}
{{- end }}
{{- end -}}
{{- end -}}
