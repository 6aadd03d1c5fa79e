import yaml


def load_settings(path):
    # ruleid: file-opened-without-close
    fh = open(path, encoding="utf-8")
    data = yaml.safe_load(fh)
    return data or {}


def read_closed(path):
    # ok: file-opened-without-close
    fh = open(path)
    text = fh.read()
    fh.close()
    return text


def read_with(path):
    # ok: file-opened-without-close
    with open(path) as fh:
        return fh.read()


def handle(path):
    # ok: file-opened-without-close
    fh = open(path)
    return fh


def read_finally(path):
    # ok: file-opened-without-close
    fh = open(path)
    try:
        return fh.read()
    finally:
        fh.close()


class Log:
    def __init__(self, path):
        # ok: file-opened-without-close
        out = open(path, "a")
        self.out = out
