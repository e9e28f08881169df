"""Builds a wheel for the import tests: `python3 wheel.py OUT_DIR NAME VERSION MODULE.py`
packs MODULE.py as module `<name>_server` with a console script NAME that runs its `main()`,
and writes VERSION into the metadata as given (the file is named for version 1.0, as a wheel's
name cannot hold what a hostile metadata version may). Prints the wheel's path. Standard
library only."""
import base64
import hashlib
import os
import sys
import zipfile


def main():
    out, name, version, module = sys.argv[1:5]
    dist = name.replace("-", "_")
    info = "%s-1.0.dist-info" % dist
    with open(module) as f:
        code = f.read()
    files = {
        "%s_server.py" % dist: code,
        info + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: gatehouse-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        info + "/entry_points.txt": "[console_scripts]\n%s = %s_server:main\n" % (name, dist),
    }
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = "\n".join(record) + "\n"
    wheel = os.path.join(out, "%s-1.0-py3-none-any.whl" % dist)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    print(wheel)


if __name__ == "__main__":
    main()
