import hashlib
import hmac


def login(user, password):
    # ruleid: non-constant-time-compare
    if user["password_hash"] == hash_password(password):
        return True
    return False


def check(payload, signature, key):
    expected = hmac.new(key, payload, hashlib.sha256).hexdigest()
    # ruleid: non-constant-time-compare
    return signature == expected


def api(request, api_key):
    # ruleid: non-constant-time-compare
    if request.headers.get("X-Key") != api_key:
        return 401
    return 200


def safe(payload, signature, key):
    expected = hmac.new(key, payload, hashlib.sha256).hexdigest()
    # ok: non-constant-time-compare
    return hmac.compare_digest(signature, expected)


def kind(token_type):
    # ok: non-constant-time-compare
    return token_type == "bearer"


def missing(token):
    # ok: non-constant-time-compare
    return token == None


def hash_password(password):
    return password


def parse(token):
    # ok: non-constant-time-compare
    return token.nesting == 1
