import hashlib


def hash_password(password):
    # ruleid: weak-password-hash, weak-hash
    return hashlib.sha1(password.encode("utf-8")).hexdigest()


def hash_pw(pwd):
    # ruleid: weak-password-hash
    return hashlib.sha256(pwd.encode()).hexdigest()


def hash_new(password):
    # ruleid: weak-password-hash
    return hashlib.new("sha256", password.encode()).hexdigest()


def file_digest(data):
    # ruleid: weak-hash
    return hashlib.md5(data).hexdigest()


def etag(body):
    # ok: weak-hash
    return hashlib.md5(body, usedforsecurity=False).hexdigest()


def slow(password, salt):
    # ok: weak-password-hash
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1)


def content_id(data):
    # ok: weak-password-hash
    return hashlib.sha256(data).hexdigest()
