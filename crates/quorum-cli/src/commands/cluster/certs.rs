//! `quorum cluster init-ca` and `issue-cert`: a private CA for a cluster and per-node
//! certificates whose subject and DNS name are the node's name, so a TLS session authenticates
//! the node it carries (used for cluster links with mutual TLS, and for the API).

use crate::exit::ExitCode;
use anyhow::{bail, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::io::Write;
use std::path::Path;

const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca.key";
/// The CA's parameters. `issue-cert` rebuilds the issuer from them and the key, so they depend
/// on nothing else; the subject names the key, so two clusters' CAs never share a subject.
fn ca_params(key: &KeyPair) -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let id: String = params
        .key_identifier(key)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("quorum cluster CA {id}"));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    Ok(params)
}

/// Writes a file readable by its owner only (keys), refusing to overwrite.
fn write_new(path: &Path, text: &str, private: bool) -> Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).with_context(|| {
        format!(
            "cannot create {} (it must not exist yet; remove it to replace it)",
            path.display()
        )
    })?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

pub fn init_ca(dir: &Path) -> Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let key = KeyPair::generate().context("cannot generate the CA key")?;
    let cert = ca_params(&key)?
        .self_signed(&key)
        .context("cannot sign the CA certificate")?;
    write_new(&dir.join(CA_KEY), &key.serialize_pem(), true)?;
    write_new(&dir.join(CA_CERT), &cert.pem(), false)?;
    println!(
        "cluster CA written to {}: {CA_CERT} (give to every node as --tls-ca, and to API clients as --ca), {CA_KEY} (keep it off the nodes)",
        dir.display()
    );
    Ok(ExitCode::Clean)
}

/// A node name travels as the certificate's DNS name: the characters a DNS label allows.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.']);
    if !ok {
        bail!("invalid node name {name:?}: use letters, digits, '-' and '.' (it becomes the certificate's DNS name)");
    }
    Ok(())
}

pub fn issue_cert(name: &str, ca: &Path, hosts: &[String], out: Option<&Path>) -> Result<ExitCode> {
    check_name(name)?;
    let key_path = ca.join(CA_KEY);
    let ca_key_pem = std::fs::read_to_string(&key_path).with_context(|| {
        format!(
            "cannot read the CA key {} (create it with `quorum cluster init-ca {}`)",
            key_path.display(),
            ca.display()
        )
    })?;
    let ca_key = KeyPair::from_pem(&ca_key_pem)
        .with_context(|| format!("{} is not a private key", key_path.display()))?;
    let issuer = Issuer::new(ca_params(&ca_key)?, ca_key);

    let mut names = vec![name.to_string()];
    for h in hosts {
        if !names.contains(h) {
            names.push(h.clone());
        }
    }
    let mut params = CertificateParams::new(names).context("invalid --host")?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    // Both: a node accepts links (server) and dials them (client) with the same certificate.
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let key = KeyPair::generate().context("cannot generate the node key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("cannot sign the node certificate")?;
    let out = out.unwrap_or(ca);
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let (cert_path, key_path) = (
        out.join(format!("{name}.pem")),
        out.join(format!("{name}.key")),
    );
    write_new(&key_path, &key.serialize_pem(), true)?;
    write_new(&cert_path, &cert.pem(), false)?;
    println!(
        "certificate for node {name}: {} and {} (quorum node --name {name} --tls-cert {} --tls-key {} --tls-ca {})",
        cert_path.display(),
        key_path.display(),
        cert_path.display(),
        key_path.display(),
        ca.join(CA_CERT).display()
    );
    Ok(ExitCode::Clean)
}
