{{/* Names, labels and the pieces every component's pod shares. */}}

{{- define "agentrun.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agentrun.name" -}}{{ include "agentrun.fullname" .root }}-{{ .component }}{{- end -}}

{{- define "agentrun.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "agentrun.labels" -}}
{{ include "agentrun.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "agentrun.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "agentrun.agentImage" -}}
{{ .Values.agentImage.repository }}:{{ .Values.agentImage.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Restricted pod security: non-root, read-only root, no privilege escalation, no capabilities, seccomp. */}}
{{- define "agentrun.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "agentrun.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The address a listener binds: the pod IP where pods share a network namespace (localkube), else all. */}}
{{- define "agentrun.listenHost" -}}
{{- if .Values.listenOnPodIP -}}
valueFrom:
  fieldRef:
    fieldPath: status.podIP
{{- else -}}
value: "0.0.0.0"
{{- end -}}
{{- end -}}

{{- define "agentrun.temporalTLS" -}}
{{- $t := .Values.temporal -}}
{{- if or $t.tls.enabled $t.tls.serverCA $t.tls.clientCert $t.apiKey.existingSecret $t.tls.serverName -}}true{{- end -}}
{{- end -}}

{{/* The Secret holding the payload codec's keys: the user's, or the one templates/codec.yaml makes. */}}
{{- define "agentrun.codecSecret" -}}
{{- .Values.codec.existingSecret | default (printf "%s-codec-keys" (include "agentrun.fullname" .)) -}}
{{- end -}}

{{/* Temporal and Kubernetes client settings, the same for the worker, the bridge, the API and the setup Job. */}}
{{- define "agentrun.commonEnv" -}}
{{- $t := .Values.temporal -}}
- name: AGENTRUN_TEMPORAL__ADDRESS
  value: {{ $t.address | quote }}
- name: AGENTRUN_TEMPORAL__NAMESPACE
  value: {{ $t.namespace | quote }}
- name: AGENTRUN_TEMPORAL__TASK_QUEUE
  value: {{ $t.taskQueue | quote }}
- name: AGENTRUN_TEMPORAL__TLS
  value: {{ include "agentrun.temporalTLS" . | eq "true" | quote }}
{{- if $t.tls.serverName }}
- name: AGENTRUN_TEMPORAL__SERVER_NAME
  value: {{ $t.tls.serverName | quote }}
{{- end }}
{{- if and $t.tls.existingSecret $t.tls.serverCA }}
- name: AGENTRUN_TEMPORAL__SERVER_CA_FILE
  value: /etc/agentrun/temporal-tls/ca.crt
{{- end }}
{{- if and $t.tls.existingSecret $t.tls.clientCert }}
- name: AGENTRUN_TEMPORAL__CLIENT_CERT_FILE
  value: /etc/agentrun/temporal-tls/tls.crt
- name: AGENTRUN_TEMPORAL__CLIENT_KEY_FILE
  value: /etc/agentrun/temporal-tls/tls.key
{{- end }}
{{- if $t.apiKey.existingSecret }}
- name: AGENTRUN_TEMPORAL__API_KEY_FILE
  value: /etc/agentrun/temporal-api-key/{{ $t.apiKey.key }}
{{- end }}
{{- if .Values.codec.enabled }}
- name: AGENTRUN_TEMPORAL__CODEC_KEYS_FILE
  value: /etc/agentrun/codec/{{ .Values.codec.key }}
{{- end }}
- name: AGENTRUN_KUBE__KUBECONFIG
  value: ""
- name: AGENTRUN_KUBE__QPS
  value: {{ .Values.kube.qps | quote }}
- name: AGENTRUN_KUBE__BURST
  value: {{ .Values.kube.burst | quote }}
{{- if .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otel.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .Values.otel.protocol | quote }}
{{- end }}
{{- range $k, $v := .Values.otel.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{- define "agentrun.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if .Values.codec.enabled }}
- name: codec-keys
  secret:
    secretName: {{ include "agentrun.codecSecret" . }}
    defaultMode: 0400
    items:
      - key: {{ .Values.codec.key }}
        path: {{ .Values.codec.key }}
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.existingSecret }}
    defaultMode: 0400
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
- name: temporal-api-key
  secret:
    secretName: {{ .Values.temporal.apiKey.existingSecret }}
    defaultMode: 0400
    items:
      - key: {{ .Values.temporal.apiKey.key }}
        path: {{ .Values.temporal.apiKey.key }}
{{- end }}
{{- end -}}

{{- define "agentrun.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.codec.enabled }}
- name: codec-keys
  mountPath: /etc/agentrun/codec
  readOnly: true
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/agentrun/temporal-tls
  readOnly: true
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
- name: temporal-api-key
  mountPath: /etc/agentrun/temporal-api-key
  readOnly: true
{{- end }}
{{- end -}}

{{/* Scheduling and pod-level fields of a component (.c is its values block). */}}
{{- define "agentrun.podCommon" -}}
serviceAccountName: {{ include "agentrun.name" (dict "root" .root "component" .component) }}
securityContext:
  {{- include "agentrun.podSecurityContext" . | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The namespaces RBAC is granted in: the watched ones, or none (meaning: cluster-wide). */}}
{{- define "agentrun.rbacNamespaces" -}}
{{- toJson .Values.watchNamespaces -}}
{{- end -}}

{{/* The Secret holding the verdict signing keys (models/signing.py): the user's, or the one templates/signing.yaml
makes. Mounted in the worker (verifies), the bridge and the API (sign) only. */}}
{{- define "agentrun.signingSecret" -}}
{{- .Values.signing.existingSecret | default (printf "%s-signing-keys" (include "agentrun.fullname" .)) -}}
{{- end -}}

{{- define "agentrun.signingEnv" -}}
{{- if .Values.signing.enabled }}
- name: AGENTRUN_TEMPORAL__SIGNING_KEYS_FILE
  value: /etc/agentrun/signing/{{ .Values.signing.key }}
{{- end }}
{{- end -}}

{{- define "agentrun.signingVolume" -}}
{{- if .Values.signing.enabled }}
- name: signing-keys
  secret:
    secretName: {{ include "agentrun.signingSecret" . }}
    defaultMode: 0400
    items:
      - key: {{ .Values.signing.key }}
        path: {{ .Values.signing.key }}
{{- end }}
{{- end -}}

{{- define "agentrun.signingMount" -}}
{{- if .Values.signing.enabled }}
- name: signing-keys
  mountPath: /etc/agentrun/signing
  readOnly: true
{{- end }}
{{- end -}}

{{/* NATS credentials and TLS for the worker (the only component that publishes run events), from Secrets. */}}
{{- define "agentrun.natsEnv" -}}
{{- $a := .Values.nats.auth -}}
{{- if $a.existingSecret }}
{{- if eq $a.type "token" }}
- name: AGENTRUN_NATS__TOKEN_FILE
  value: /etc/agentrun/nats-auth/token
{{- else if eq $a.type "userPassword" }}
- name: AGENTRUN_NATS__USER
  value: {{ $a.user | quote }}
- name: AGENTRUN_NATS__PASSWORD_FILE
  value: /etc/agentrun/nats-auth/password
{{- else }}
- name: AGENTRUN_NATS__CREDS_FILE
  value: /etc/agentrun/nats-auth/creds
{{- end }}
{{- end }}
{{- if .Values.nats.tls.existingSecret }}
{{- if .Values.nats.tls.serverCA }}
- name: AGENTRUN_NATS__CA_FILE
  value: /etc/agentrun/nats-tls/ca.crt
{{- end }}
{{- if .Values.nats.tls.clientCert }}
- name: AGENTRUN_NATS__CERT_FILE
  value: /etc/agentrun/nats-tls/tls.crt
- name: AGENTRUN_NATS__KEY_FILE
  value: /etc/agentrun/nats-tls/tls.key
{{- end }}
{{- end }}
{{- end -}}

{{- define "agentrun.natsVolumes" -}}
{{- if .Values.nats.auth.existingSecret }}
- name: nats-auth
  secret:
    secretName: {{ .Values.nats.auth.existingSecret }}
    defaultMode: 0400
{{- end }}
{{- if .Values.nats.tls.existingSecret }}
- name: nats-tls
  secret:
    secretName: {{ .Values.nats.tls.existingSecret }}
    defaultMode: 0400
{{- end }}
{{- end -}}

{{- define "agentrun.natsMounts" -}}
{{- if .Values.nats.auth.existingSecret }}
- name: nats-auth
  mountPath: /etc/agentrun/nats-auth
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.existingSecret }}
- name: nats-tls
  mountPath: /etc/agentrun/nats-tls
  readOnly: true
{{- end }}
{{- end -}}
