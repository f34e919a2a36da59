//! Test certificates made at run time for the TLS listener tests (issue 19):
//! [`TestPki`] writes a CA, a server certificate for the broker and client
//! certificates (trusted, from a rogue CA, expired) as PEM files into one
//! directory, and gives the `ssl.*` broker keys that use them.
//!
//! Every key is an ECDSA P-256 key in unencrypted PKCS#8 (`BEGIN PRIVATE
//! KEY`), which rustls, OpenSSL (librdkafka, Python), Java's PEM stores
//! (kafka-clients, KIP-651) and Node all read; every certificate is signed
//! with ECDSA-SHA256 by [`rcgen`]. Nothing here depends on the broker: the
//! files are what an operator would hand to Kafka.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::error::HarnessError;

/// The subject of the trusted client certificate, as Kafka's default SSL
/// principal builder prints it (RFC 2253: the last RDN of the DER sequence
/// first, so the certificate holds `O=weir`, `OU=test`, `CN=client-1` in
/// that order). Kafka's principal for it is `User:CN=client-1,OU=test,O=weir`.
pub const CLIENT_SUBJECT: &str = "CN=client-1,OU=test,O=weir";

/// The subject of both CAs (the rogue one copies the trusted one's name,
/// so only the signature tells their certificates apart).
const CA_COMMON_NAME: &str = "weir test CA";

/// One client certificate with its key, as the three files clients ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The private key followed by the certificate and its issuing CA, in
    /// one PEM file (Java's `ssl.keystore.type=PEM` `ssl.keystore.location`).
    pub pem: PathBuf,
    /// The private key alone, PKCS#8 PEM (librdkafka's `ssl.key.location`,
    /// Python's `ssl_keyfile`, Node's `key`).
    pub key: PathBuf,
    /// The certificate alone, PEM (librdkafka's
    /// `ssl.certificate.location`, Python's `ssl_certfile`, Node's `cert`).
    pub crt: PathBuf,
}

/// A test PKI in one directory:
///
/// | file | content |
/// |---|---|
/// | `ca.pem` | the trusted CA's certificate (the broker's truststore and the clients' CA file) |
/// | `server.pem` | the server's key, then its certificate and the CA's (the broker's PEM keystore) |
/// | `server.key`, `server.crt` | the server's key, and its certificate alone |
/// | `client.pem`, `.key`, `.crt` | the trusted client ([`CLIENT_SUBJECT`], signed by the CA) |
/// | `rogue-ca.pem` | a second, untrusted CA with the same name as the trusted one |
/// | `rogue-client.pem`, `.key`, `.crt` | a client with the same subject, signed by the rogue CA |
/// | `expired-client.pem`, `.key`, `.crt` | a client signed by the trusted CA, valid 2000-01-01 to 2001-01-01 |
///
/// The server certificate names `127.0.0.1` (IP SAN) and `localhost` (DNS
/// SAN) and has the serverAuth extended key usage; client certificates have
/// clientAuth. The trusted certificates are valid from 2000-01-01 to
/// 2100-01-01.
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
    /// The temporary directory [`Self::new`] made, removed on drop.
    _temp: Option<TempDir>,
}

impl TestPki {
    /// Generates a PKI into a new temporary directory, removed when the
    /// returned value is dropped.
    ///
    /// # Errors
    ///
    /// As [`Self::write_to`], and [`HarnessError::Io`] when the directory
    /// cannot be made.
    pub fn new() -> Result<Self, HarnessError> {
        let temp = tempfile::Builder::new()
            .prefix("weir-itest-pki-")
            .tempdir()
            .map_err(|e| HarnessError::io("creating the PKI's temp dir", e))?;
        let mut pki = Self::write_to(temp.path())?;
        pki._temp = Some(temp);
        Ok(pki)
    }

    /// Generates a PKI into `dir` (which must exist), overwriting the files
    /// of the table above.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when a key or certificate cannot be made or a
    /// file cannot be written.
    pub fn write_to(dir: &Path) -> Result<Self, HarnessError> {
        let pki = Self {
            dir: dir.to_path_buf(),
            _temp: None,
        };
        let ca = Ca::new()?;
        let rogue = Ca::new()?;
        pki.write("ca.pem", &ca.certificate.pem())?;
        pki.write("rogue-ca.pem", &rogue.certificate.pem())?;

        let server_key = generate_key()?;
        let mut server =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(|e| pki_error("server certificate parameters", e))?;
        server.distinguished_name = distinguished_name(&[(DnType::CommonName, "localhost")]);
        server.not_before = date_time_ymd(2000, 1, 1);
        server.not_after = date_time_ymd(2100, 1, 1);
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.use_authority_key_identifier_extension = true;
        let server_cert = server
            .signed_by(&server_key, &ca.issuer)
            .map_err(|e| pki_error("signing the server certificate", e))?;
        pki.write_identity("server", &server_key, &server_cert, &ca.certificate)?;

        pki.write_client("client", &ca, 2000..2100)?;
        pki.write_client("rogue-client", &rogue, 2000..2100)?;
        pki.write_client("expired-client", &ca, 2000..2001)?;
        Ok(pki)
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `ca.pem`: the trusted CA's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// `rogue-ca.pem`: the untrusted CA's certificate.
    pub fn rogue_ca(&self) -> PathBuf {
        self.dir.join("rogue-ca.pem")
    }

    /// The server's files: `server.pem` (key and chain), `server.key`,
    /// `server.crt`.
    pub fn server(&self) -> ClientIdentity {
        self.identity("server")
    }

    /// The trusted client ([`CLIENT_SUBJECT`], signed by the CA).
    pub fn client(&self) -> ClientIdentity {
        self.identity("client")
    }

    /// A client whose certificate the rogue CA signed (same subject as the
    /// trusted client, issuer name equal to the trusted CA's).
    pub fn rogue_client(&self) -> ClientIdentity {
        self.identity("rogue-client")
    }

    /// A client whose certificate the trusted CA signed but which expired
    /// on 2001-01-01.
    pub fn expired_client(&self) -> ClientIdentity {
        self.identity("expired-client")
    }

    /// The broker keys of a TLS listener that presents the server
    /// certificate and verifies client certificates against the CA, as
    /// Kafka spells them: `ssl.keystore.type=PEM`,
    /// `ssl.keystore.location=<server.pem>`, `ssl.truststore.type=PEM`,
    /// `ssl.truststore.location=<ca.pem>`. Whether a client certificate is
    /// asked for is `ssl.client.auth`, which the test sets.
    pub fn broker_config(&self) -> Vec<(String, String)> {
        vec![
            ("ssl.keystore.type".into(), "PEM".into()),
            (
                "ssl.keystore.location".into(),
                self.server().pem.display().to_string(),
            ),
            ("ssl.truststore.type".into(), "PEM".into()),
            (
                "ssl.truststore.location".into(),
                self.ca().display().to_string(),
            ),
        ]
    }

    fn identity(&self, name: &str) -> ClientIdentity {
        ClientIdentity {
            pem: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}.key")),
            crt: self.dir.join(format!("{name}.crt")),
        }
    }

    /// Writes a client certificate for [`CLIENT_SUBJECT`] signed by `ca`,
    /// valid from January 1st of the first year of `years` to January 1st
    /// of its end, as `<name>.{pem,key,crt}`.
    fn write_client(
        &self,
        name: &str,
        ca: &Ca,
        years: std::ops::Range<i32>,
    ) -> Result<(), HarnessError> {
        let key = generate_key()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(&[
            (DnType::OrganizationName, "weir"),
            (DnType::OrganizationalUnitName, "test"),
            (DnType::CommonName, "client-1"),
        ]);
        params.not_before = date_time_ymd(years.start, 1, 1);
        params.not_after = date_time_ymd(years.end, 1, 1);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &ca.issuer)
            .map_err(|e| pki_error(&format!("signing the {name} certificate"), e))?;
        self.write_identity(name, &key, &cert, &ca.certificate)
    }

    /// Writes `<name>.key`, `<name>.crt` and `<name>.pem` (key, certificate,
    /// issuer certificate).
    fn write_identity(
        &self,
        name: &str,
        key: &KeyPair,
        cert: &Certificate,
        issuer: &Certificate,
    ) -> Result<(), HarnessError> {
        let key_pem = key.serialize_pem();
        self.write(&format!("{name}.key"), &key_pem)?;
        self.write(&format!("{name}.crt"), &cert.pem())?;
        self.write(
            &format!("{name}.pem"),
            &format!("{key_pem}{}{}", cert.pem(), issuer.pem()),
        )
    }

    fn write(&self, file: &str, text: &str) -> Result<(), HarnessError> {
        let path = self.dir.join(file);
        std::fs::write(&path, text)
            .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
    }
}

/// A self-signed CA: its certificate and what signs with its key.
struct Ca {
    certificate: Certificate,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A new CA named [`CA_COMMON_NAME`] with a fresh key, valid from
    /// 2000-01-01 to 2100-01-01.
    fn new() -> Result<Self, HarnessError> {
        let key = generate_key()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(&[
            (DnType::OrganizationName, "weir"),
            (DnType::CommonName, CA_COMMON_NAME),
        ]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = date_time_ymd(2000, 1, 1);
        params.not_after = date_time_ymd(2100, 1, 1);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = params
            .self_signed(&key)
            .map_err(|e| pki_error("self-signing the CA certificate", e))?;
        Ok(Self {
            certificate,
            issuer: Issuer::new(params, key),
        })
    }
}

/// A fresh ECDSA P-256 key (rcgen's default algorithm).
fn generate_key() -> Result<KeyPair, HarnessError> {
    KeyPair::generate().map_err(|e| pki_error("generating a key", e))
}

/// A distinguished name with `entries` in DER order.
fn distinguished_name(entries: &[(DnType, &str)]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for (kind, value) in entries {
        name.push(kind.clone(), *value);
    }
    name
}

fn pki_error(action: &str, error: rcgen::Error) -> HarnessError {
    HarnessError::io(
        format!("test PKI: {action}"),
        std::io::Error::other(error.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use webpki::{EndEntityCert, KeyUsage};

    use super::*;

    fn certificates(path: &Path) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_file_iter(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Verifies the certificate in `crt` for `usage` now against the CA in
    /// `ca`, as rustls's verifiers do.
    fn verify(ca: &Path, crt: &Path, usage: KeyUsage) -> Result<(), webpki::Error> {
        let ca = certificates(ca);
        let anchors = [webpki::anchor_from_trusted_cert(&ca[0]).unwrap()];
        let leaf = certificates(crt);
        EndEntityCert::try_from(&leaf[0])?
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &anchors,
                &[],
                UnixTime::now(),
                usage,
                None,
                None,
            )
            .map(|_| ())
    }

    #[test]
    fn trusted_certificates_verify_and_the_bad_clients_fail_for_their_reason() {
        let pki = TestPki::new().unwrap();
        verify(&pki.ca(), &pki.server().crt, KeyUsage::server_auth()).unwrap();
        verify(&pki.ca(), &pki.client().crt, KeyUsage::client_auth()).unwrap();
        let rogue = verify(&pki.ca(), &pki.rogue_client().crt, KeyUsage::client_auth());
        assert!(
            matches!(
                rogue,
                Err(webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey)
            ),
            "{rogue:?}"
        );
        verify(
            &pki.rogue_ca(),
            &pki.rogue_client().crt,
            KeyUsage::client_auth(),
        )
        .unwrap();
        let expired = verify(
            &pki.ca(),
            &pki.expired_client().crt,
            KeyUsage::client_auth(),
        );
        assert!(
            matches!(expired, Err(webpki::Error::CertExpired { .. })),
            "{expired:?}"
        );
        let server = certificates(&pki.server().crt);
        let server = EndEntityCert::try_from(&server[0]).unwrap();
        for name in ["127.0.0.1", "localhost"] {
            server
                .verify_is_valid_for_subject_name(&ServerName::try_from(name).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
        assert!(server
            .verify_is_valid_for_subject_name(&ServerName::try_from("127.0.0.2").unwrap())
            .is_err());
    }

    #[test]
    fn key_files_hold_one_pkcs8_key_and_pem_files_the_key_then_the_chain() {
        let pki = TestPki::new().unwrap();
        for identity in [
            pki.server(),
            pki.client(),
            pki.rogue_client(),
            pki.expired_client(),
        ] {
            let key = std::fs::read_to_string(&identity.key).unwrap();
            assert!(
                key.starts_with("-----BEGIN PRIVATE KEY-----"),
                "{identity:?}"
            );
            assert!(matches!(
                PrivateKeyDer::from_pem_file(&identity.key).unwrap(),
                PrivateKeyDer::Pkcs8(_)
            ));
            let pem = std::fs::read_to_string(&identity.pem).unwrap();
            assert!(pem.starts_with(key.as_str()), "{identity:?}: the key first");
            let chain = certificates(&identity.pem);
            assert_eq!(chain.len(), 2, "{identity:?}: leaf and issuer");
            assert_eq!(chain[0], certificates(&identity.crt)[0], "{identity:?}");
        }
        assert_eq!(
            certificates(&pki.client().pem)[1],
            certificates(&pki.ca())[0]
        );
        assert_eq!(
            certificates(&pki.rogue_client().pem)[1],
            certificates(&pki.rogue_ca())[0]
        );
        assert_ne!(certificates(&pki.rogue_ca()), certificates(&pki.ca()));
        let config = pki.broker_config();
        assert!(config.contains(&(
            "ssl.keystore.location".into(),
            pki.server().pem.display().to_string()
        )));
        assert!(config.contains(&(
            "ssl.truststore.location".into(),
            pki.ca().display().to_string()
        )));
    }
}
