import os
import shlex
import subprocess


def archive(name):
    # ruleid: shell-command-from-strings
    os.system(f"tar czf /tmp/{name}.tgz /srv/data")


def convert(path):
    # ruleid: shell-command-from-strings
    subprocess.run("convert %s out.png" % path, shell=True, check=True)


def grep(term):
    # ruleid: shell-command-from-strings
    return subprocess.check_output("grep -r " + term + " /srv", shell=True)


def safe(name):
    # ok: shell-command-from-strings
    subprocess.run(["tar", "czf", f"/tmp/{name}.tgz", "/srv/data"], check=True)


def quoted(name):
    # ok: shell-command-from-strings
    os.system(f"tar czf /tmp/{shlex.quote(name)}.tgz /srv/data")


def constant():
    # ok: shell-command-from-strings
    subprocess.run("ls -l /srv", shell=True, check=True)
