"""The credentials localkube presents when it calls an admission webhook, from kube-apiserver's own configuration:
`--admission-control-config-file` names an `AdmissionConfiguration` (apiserver.config.k8s.io/v1) whose
`ValidatingAdmissionWebhook` and `MutatingAdmissionWebhook` plug-ins each carry a `WebhookAdmissionConfiguration`
(inline as `configuration`, or in the file `path` names) with a `kubeConfigFile`. That kubeconfig's `users` are keyed
by the webhook server they are for: `host:port`, `host` (port 443), `*.<namespace>.svc` (any Service of the
namespace) or `*` (any webhook), the most specific first; each gives a client certificate and key (files or `-data`)
and/or a bearer token, as the real server reads them.

A webhook that requires client certificates (the API's, with AGENTRUN_WEBHOOK_CLIENT_CA_FILE) can then require them
of localkube as of a real API server: `agentrun up` makes its own CA, a certificate for localkube, and this file.
"""

from __future__ import annotations

import base64
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")


class AdmissionConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Credentials:
    """What to present to one webhook server: a client certificate chain and key (PEM), and/or a bearer token."""

    cert_pem: bytes = b""
    key_pem: bytes = b""
    token: str = ""

    def load_into(self, ctx: ssl.SSLContext) -> None:
        if not self.cert_pem:
            return
        # ssl loads a chain only from files: written to private temporary files, read, removed.
        with tempfile.TemporaryDirectory(prefix="localkube-webhook-") as d:
            cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
            cert.write_bytes(self.cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(self.key_pem)
            ctx.load_cert_chain(str(cert), str(key))


def _read(base: Path, user: dict[str, Any], field: str, where: str) -> bytes:
    data = user.get(f"{field}-data")
    if data:
        try:
            return base64.b64decode(data)
        except ValueError as e:
            raise AdmissionConfigError(f"{where}: {field}-data is not base64 ({e})") from e
    path = user.get(field)
    if not path:
        return b""
    full = Path(path) if Path(path).is_absolute() else base / path
    try:
        return full.read_bytes()
    except OSError as e:
        raise AdmissionConfigError(f"{where}: cannot read {field} {full} ({e.strerror or e})") from e


def _kubeconfig_users(path: Path) -> dict[str, Credentials]:
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AdmissionConfigError(f"kubeConfigFile {path}: {e}") from e
    out: dict[str, Credentials] = {}
    for entry in cfg.get("users") or []:
        name, user = str(entry.get("name") or ""), entry.get("user") or {}
        where = f"kubeConfigFile {path}, user {name!r}"
        creds = Credentials(_read(path.parent, user, "client-certificate", where),
                            _read(path.parent, user, "client-key", where), str(user.get("token") or ""))
        if bool(creds.cert_pem) != bool(creds.key_pem):
            raise AdmissionConfigError(f"{where}: a client certificate needs its key (and a key its certificate)")
        out[name] = creds
    return out


@dataclass
class WebhookCredentials:
    """Credentials by webhook server name, as the `users` of the plug-ins' kubeconfigs give them."""

    by_server: dict[str, Credentials]

    @classmethod
    def none(cls) -> WebhookCredentials:
        return cls({})

    @classmethod
    def load(cls, path: Path) -> WebhookCredentials:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise AdmissionConfigError(f"--admission-control-config-file {path}: {e}") from e
        if doc.get("kind") != "AdmissionConfiguration":
            raise AdmissionConfigError(f"{path}: kind must be AdmissionConfiguration, not {doc.get('kind')!r}")
        users: dict[str, Credentials] = {}
        for plugin in doc.get("plugins") or []:
            if plugin.get("name") not in PLUGINS:
                continue
            conf = plugin.get("configuration")
            if conf is None and plugin.get("path"):
                conf_path = Path(plugin["path"]) if Path(plugin["path"]).is_absolute() else path.parent / plugin["path"]
                try:
                    conf = yaml.safe_load(conf_path.read_text()) or {}
                except (OSError, yaml.YAMLError) as e:
                    raise AdmissionConfigError(f"{path}: plug-in {plugin['name']}: {e}") from e
            kubeconfig = (conf or {}).get("kubeConfigFile")
            if not kubeconfig:
                continue
            kc = Path(kubeconfig) if Path(kubeconfig).is_absolute() else path.parent / kubeconfig
            # Both plug-ins usually name the same file; the last one's entries win, as they are the same.
            users.update(_kubeconfig_users(kc))
        return cls(users)

    def for_server(self, host: str, port: int) -> Credentials | None:
        """The most specific entry for `host:port`: the exact name with the port, without it for 443, a Service
        wildcard `*.<namespace>.svc`, then `*`."""
        names = [f"{host}:{port}"]
        if port == 443:
            names.append(host)
        parts = host.split(".")
        if len(parts) == 3 and parts[2] == "svc":
            names += [f"*.{parts[1]}.svc:{port}", f"*.{parts[1]}.svc"] if port == 443 else [f"*.{parts[1]}.svc:{port}"]
        names.append("*")
        return next((self.by_server[n] for n in names if n in self.by_server), None)
