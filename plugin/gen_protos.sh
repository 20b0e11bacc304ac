#!/bin/sh
# Regenerate numa_align/api/*_pb2*.py from the .proto files beside them.
#
# protoc is run with plugin/ as include root, so descriptor-pool names are
# numa_align/api/<file>.proto (unique, unlike upstream's two api.proto files).
# protoc writes absolute imports (`from numa_align.api import x_pb2`); they are
# rewritten to package-relative ones so the package can be vendored or renamed.
# Usage: plugin/gen_protos.sh [python]   (default: the project venv's python)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=${1:-"$here/../.venv/bin/python"}
api=numa_align/api
cd "$here"
rm -f "$api"/*_pb2.py "$api"/*_pb2.pyi "$api"/*_pb2_grpc.py
"$python" -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. "$api"/*.proto
for f in "$api"/*_pb2_grpc.py "$api"/*_pb2.py; do
    sed -i -e 's/^from numa_align\.api import \([a-z0-9_]*_pb2\)/from . import \1/' "$f"
done
if grep -n '^from numa_align\|^import numa_align' "$api"/*_pb2*.py; then
    echo "gen_protos.sh: absolute imports left in generated code" >&2
    exit 1
fi
