import os

from flask import Flask

app = Flask(__name__)

if __name__ == "__main__":
    # ruleid: debug-enabled-in-code
    app.run(host="0.0.0.0", debug=True)

# ok: debug-enabled-in-code
app.run(debug=os.environ.get("FLASK_DEBUG") == "1")
