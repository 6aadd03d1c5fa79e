import pickle

import yaml


def restore(blob):
    # ruleid: unsafe-deserialization
    return pickle.loads(blob)


def settings(text):
    # ruleid: unsafe-deserialization
    return yaml.load(text, Loader=yaml.Loader)


def settings_unsafe(text):
    # ruleid: unsafe-deserialization
    return yaml.unsafe_load(text)


def settings_safe(text):
    # ok: unsafe-deserialization
    return yaml.safe_load(text)


def settings_safe_loader(text):
    # ok: unsafe-deserialization
    return yaml.load(text, Loader=yaml.SafeLoader)


def save(obj):
    # ok: unsafe-deserialization
    return pickle.dumps(obj)
