import os

from flask import Flask, request, send_file, send_from_directory
from werkzeug.utils import safe_join, secure_filename

app = Flask(__name__)
EXPORT_DIR = "/srv/exports"


@app.route("/exports/<path:name>")
def download(name):
    # ruleid: path-from-request
    path = os.path.join(EXPORT_DIR, name)
    return send_file(path)


@app.route("/files")
def by_query():
    name = request.args.get("name")
    # ruleid: path-from-request
    with open(os.path.join(EXPORT_DIR, name)) as fh:
        return fh.read()


@app.route("/checked/<path:name>")
def checked(name):
    # ok: path-from-request
    path = os.path.realpath(os.path.join(EXPORT_DIR, name))
    if not path.startswith(EXPORT_DIR + os.sep):
        return "no", 404
    return send_file(path)


@app.route("/safe/<path:name>")
def safe(name):
    # ok: path-from-request
    return send_from_directory(EXPORT_DIR, name)


@app.route("/joined/<path:name>")
def joined(name):
    # ok: path-from-request
    return send_file(safe_join(EXPORT_DIR, name))


@app.route("/upload/<name>")
def upload(name):
    # ok: path-from-request
    return send_file(os.path.join(EXPORT_DIR, secure_filename(name)))


def internal(name):
    # ok: path-from-request
    return open(os.path.join(EXPORT_DIR, name)).read()
