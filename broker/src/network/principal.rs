//! The principal of a client on an SSL listener (Kafka's
//! `DefaultKafkaPrincipalBuilder` with `SslPrincipalMapper`, KIP-371):
//! the subject of its certificate as an RFC 2253 distinguished name, as
//! the JDK's `X500Principal.getName()` writes it, mapped by
//! `ssl.principal.mapping.rules`. A client without a certificate is
//! `User:ANONYMOUS`; on SASL_SSL the SASL exchange names the principal.
//!
//! Rules (Kafka's syntax): a list separated by commas or line breaks of
//! `DEFAULT` (the whole distinguished name) and
//! `RULE:<pattern>/<replacement>/[L|U]`, where `<pattern>` must match the
//! whole name, `<replacement>` may use `$1`... (empty keeps the name) and
//! `L`/`U` turn the result to lower or upper case; `\` escapes `/` inside
//! a pattern or replacement. The first rule that applies names the
//! principal; when none does, the connection is refused, as Kafka's
//! `NoMatchingRule`. Patterns are Rust `regex` patterns: the usual Java
//! patterns (`^CN=(.*?),OU=(.*?)$`) mean the same.

use regex::Regex;
use x509_parser::prelude::{FromDer, X509Certificate};

/// One rule of `ssl.principal.mapping.rules`.
#[derive(Debug)]
enum Rule {
    /// `DEFAULT`: the distinguished name itself.
    Default,
    /// `RULE:pattern/replacement/[LU]`.
    Replace {
        /// The pattern, anchored to the whole name.
        whole: Regex,
        /// The pattern as written, for the replacement.
        pattern: Regex,
        /// In `regex`'s replacement syntax.
        replacement: String,
        /// `L` or `U`.
        case: Option<char>,
    },
}

/// `ssl.principal.mapping.rules`, parsed.
#[derive(Debug)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

impl SslPrincipalMapper {
    /// Parses the rules (see the module doc).
    ///
    /// # Errors
    /// A part that is neither `DEFAULT` nor a complete `RULE:` (Kafka's
    /// "Invalid rule"), or a pattern that does not compile.
    pub fn from_rules(text: &str) -> Result<SslPrincipalMapper, String> {
        let mut rules = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix("DEFAULT").filter(|a| {
                a.trim_start_matches([' ', '\t'])
                    .chars()
                    .next()
                    .is_none_or(|c| c == ',' || c == '\n')
            }) {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    until_slash(after).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let (replacement, after) =
                    until_slash(after).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let case = after.chars().next().filter(|c| matches!(c, 'L' | 'U'));
                rest = &after[case.map_or(0, char::len_utf8)..];
                let compile = |p: &str| {
                    Regex::new(p).map_err(|e| format!("Invalid rule pattern {pattern}: {e}"))
                };
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    pattern: compile(&pattern)?,
                    replacement: java_replacement(&replacement),
                    case,
                });
            } else {
                return Err(format!("Invalid rule: {rest}"));
            }
            // Whatever follows a rule up to the next separator is ignored,
            // as Kafka's rule splitter does.
            match rest.find([',', '\n']) {
                Some(at) => rest = &rest[at + 1..],
                None => break,
            }
        }
        Ok(SslPrincipalMapper { rules })
    }

    /// The principal name of distinguished name `dn`: the first rule that
    /// applies.
    ///
    /// # Errors
    /// No rule applies (Kafka's `NoMatchingRule`).
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = if replacement.is_empty() {
                        dn.to_string()
                    } else {
                        pattern.replace_all(dn, replacement.as_str()).into_owned()
                    };
                    return Ok(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
            }
        }
        Err(format!("No rules apply to {dn}"))
    }
}

/// The text up to the first `/` not escaped by `\` (escapes of `/` are
/// removed, others kept) and what follows that `/`.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '/' => return Some((out, &text[at + 1..])),
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    None
}

/// A Java `Matcher.replaceAll` replacement in `regex`'s syntax: `$n` is
/// `${n}` (so `$1a` stays group 1 then `a`), `\x` is a literal `x`, and a
/// literal `$` is `$$`.
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    out.push(d);
                    chars.next();
                }
                out.push('}');
            }
            '$' => out.push('$'),
            c => out.push(c),
        }
    }
    out
}

/// The short names the JDK's RFC 2253 form uses (`X500Principal.RFC2253`);
/// other attributes are written as `<dotted OID>=#<hex of the DER value>`.
const RFC2253_KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject of DER certificate `der` as RFC 2253 writes it: the
/// relative names in reverse order joined by `,`, attributes of one name
/// by `+`, special characters escaped with `\`.
///
/// # Errors
/// The certificate does not parse.
pub fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|e| format!("the client certificate does not parse: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|attribute| {
                    let oid = attribute.attr_type().to_id_string();
                    let keyword = RFC2253_KEYWORDS
                        .iter()
                        .find(|(id, _)| *id == oid)
                        .map(|(_, k)| *k);
                    match (keyword, attribute.as_str()) {
                        (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
                        _ => {
                            let value = attribute.attr_value();
                            let hex: String =
                                der_of(value).iter().map(|b| format!("{b:02x}")).collect();
                            format!("{oid}=#{hex}")
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// The DER encoding of an attribute value (tag, length, content).
fn der_of(value: &x509_parser::der_parser::asn1_rs::Any<'_>) -> Vec<u8> {
    use x509_parser::der_parser::asn1_rs::ToDer;
    value.to_der_vec().unwrap_or_default()
}

/// RFC 2253 section 2.4 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's `SslPrincipalMapperTest` cases.
    #[test]
    fn rules_map_names_as_kafkas_ssl_principal_mapper() {
        let mapper = SslPrincipalMapper::from_rules(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
             DEFAULT",
        )
        .unwrap();
        assert_eq!(
            mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US").unwrap(),
            "Duke"
        );
        assert_eq!(
            mapper
                .name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US")
                .unwrap(),
            "duke@sme"
        );
        assert_eq!(
            mapper
                .name("cn=duke,ou=JavaSoft,dc=example,dc=com")
                .unwrap(),
            "DUKE@JAVASOFT"
        );
        assert_eq!(mapper.name("OU=JavaSoft,CN=duke1,O=Sun").unwrap(), "DUKE1");
        assert_eq!(
            mapper.name("OU=JavaSoft,O=Sun,C=US").unwrap(),
            "OU=JavaSoft,O=Sun,C=US"
        );
        let default = SslPrincipalMapper::from_rules("DEFAULT").unwrap();
        assert_eq!(default.name("CN=a,O=b").unwrap(), "CN=a,O=b");
    }

    #[test]
    fn no_matching_rule_and_bad_rules_are_errors() {
        let mapper = SslPrincipalMapper::from_rules("RULE:^CN=(.*)$/$1/").unwrap();
        assert_eq!(mapper.name("CN=alice").unwrap(), "alice");
        assert!(mapper.name("O=org").unwrap_err().contains("No rules apply"));
        for bad in [
            "RULE:^CN=(.*)$",
            "RULE:^CN=(.*)$/$1",
            "DEFAULTS",
            "nonsense",
            "RULE:(/x/",
        ] {
            assert!(SslPrincipalMapper::from_rules(bad).is_err(), "{bad}");
        }
        // An escaped slash belongs to the pattern; text after L/U is ignored.
        let mapper =
            SslPrincipalMapper::from_rules("RULE:^CN=(.*)\\/x$/$1/L junk\nDEFAULT").unwrap();
        assert_eq!(mapper.name("CN=AB/x").unwrap(), "ab");
        assert_eq!(mapper.name("CN=AB").unwrap(), "CN=AB");
        // $1a is group 1 followed by "a", as in Java.
        let mapper = SslPrincipalMapper::from_rules("RULE:^CN=(.*)$/$1a/").unwrap();
        assert_eq!(mapper.name("CN=b").unwrap(), "ba");
    }

    #[test]
    fn the_subject_is_written_as_rfc_2253() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "Team");
        dn.push(rcgen::DnType::CommonName, "client-1");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            subject_dn(cert.der()).unwrap(),
            "CN=client-1,OU=Team,O=Acme\\, Inc.,C=US"
        );
        assert!(subject_dn(b"not a certificate").is_err());
    }
}
