"""A throwaway PKI for the matrix's TLS listeners, made at run time with the
openssl command line (Debian's `openssl`, which librdkafka.sh installs when
missing) in the run's scratch directory, which run.py deletes afterwards:
nothing here is ever committed.

The files are the ones librdkafka's test harness (trivup's SslApp) gives its
tests: a CA, a client key and certificate in PEM, DER and PKCS#12 (key,
certificate and CA, under `password`), and a file of several CA
certificates; plus the broker's PEM keystore. Keys are RSA 2048, as
trivup's, unencrypted (librdkafka reads them whether or not
`ssl.key.password` is set; the PKCS#12 file is the one protected)."""

import subprocess
from pathlib import Path

# The broker listens on, and clients dial, 127.0.0.1; librdkafka >= 2.0
# checks the broker's name (ssl.endpoint.identification.algorithm=https).
BROKER_SAN = "IP:127.0.0.1,DNS:localhost"
# The client certificate's subject: its principal on the SSL listener is
# `User:` + this (Kafka's DEFAULT principal mapping rule, RFC 2253).
CLIENT_SUBJECT = "CN=weir-compat-client,O=weir"
PASSWORD = "weir-compat-pkcs12"

CA_EXTENSIONS = """basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""
LEAF_EXTENSIONS = """basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = {usage}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


class Pki:
    """The files, by attribute:

    - `ca`, `ca_der`: the CA certificate (both listeners' truststore and the
      clients' `ssl.ca.location`); `all_cas`: it and an unrelated CA's.
    - `broker_keystore`: the broker's PKCS#8 key, certificate (for
      BROKER_SAN, serverAuth) and the CA's: `ssl.keystore.type=PEM`.
    - `client_key` / `client_key_der`, `client_cert` / `client_cert_der`:
      the client's key and certificate (CLIENT_SUBJECT, clientAuth);
      `client_pkcs12`: key, certificate and CA under PASSWORD.
    """

    def __init__(self, directory: Path):
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.ext").write_text(CA_EXTENSIONS)
        (directory / "broker.ext").write_text(
            LEAF_EXTENSIONS.format(usage="serverAuth") + f"subjectAltName = {BROKER_SAN}\n")
        (directory / "client.ext").write_text(LEAF_EXTENSIONS.format(usage="clientAuth"))
        self.ca = directory / "ca.pem"
        self.ca_der = directory / "ca.der"
        self.all_cas = directory / "all-cas.pem"
        self.broker_keystore = directory / "broker.pem"
        self.client_key = directory / "client-priv.pem"
        self.client_key_der = directory / "client-priv.der"
        self.client_cert = directory / "client-pub.pem"
        self.client_cert_der = directory / "client-pub.der"
        self.client_pkcs12 = directory / "client.pfx"
        self.password = PASSWORD
        for name in ("ca", "other-ca"):
            self._openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                          "-out", f"{name}.key")
            self._openssl("req", "-new", "-key", f"{name}.key",
                          "-subj", f"/O=weir/CN=weir compat {name}", "-out", f"{name}.csr")
            self._openssl("x509", "-req", "-in", f"{name}.csr", "-key", f"{name}.key",
                          "-sha256", "-days", "30", "-extfile", "ca.ext", "-out", f"{name}.pem")
        for name, subject in (("broker", "/O=weir/CN=localhost"),
                              ("client", "/" + "/".join(reversed(CLIENT_SUBJECT.split(","))))):
            self._openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                          "-out", f"{name}.key")
            self._openssl("req", "-new", "-key", f"{name}.key", "-subj", subject,
                          "-out", f"{name}.csr")
            self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem",
                          "-CAkey", "ca.key", "-CAcreateserial", "-sha256", "-days", "30",
                          "-extfile", f"{name}.ext", "-out", f"{name}.crt")
        self._openssl("x509", "-in", "ca.pem", "-outform", "der", "-out", self.ca_der.name)
        self.all_cas.write_text(self.ca.read_text() + (directory / "other-ca.pem").read_text())
        self.broker_keystore.write_text("".join(
            (directory / f).read_text() for f in ("broker.key", "broker.crt", "ca.pem")))
        (directory / "client.key").rename(self.client_key)
        (directory / "client.crt").rename(self.client_cert)
        self._openssl("rsa", "-in", self.client_key.name, "-outform", "der",
                      "-out", self.client_key_der.name)
        self._openssl("x509", "-in", self.client_cert.name, "-outform", "der",
                      "-out", self.client_cert_der.name)
        self._openssl("pkcs12", "-export", "-inkey", self.client_key.name,
                      "-in", self.client_cert.name, "-certfile", "ca.pem",
                      "-passout", f"pass:{PASSWORD}", "-out", self.client_pkcs12.name)

    def _openssl(self, *args: str):
        run = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} exited with {run.returncode}: "
                               f"{run.stderr}")

    def trivup_env(self) -> dict:
        """The SSL_* variables trivup sets for librdkafka's tests (0097
        reads the client's files in every encoding from them)."""
        return {
            "SSL_password": self.password,
            "SSL_pkcs": str(self.client_pkcs12),
            "SSL_priv_pem": str(self.client_key),
            "SSL_priv_der": str(self.client_key_der),
            "SSL_pub_pem": str(self.client_cert),
            "SSL_pub_der": str(self.client_cert_der),
            "SSL_ca_pem": str(self.ca),
            "SSL_ca_der": str(self.ca_der),
            "SSL_all_cas_pem": str(self.all_cas),
        }
