#!/bin/sh
# Installs the FastAPI baseline from Debian's packages (system Python,
# /usr/bin/python3). python3-uvloop and python3-httptools are what
# `pip install "uvicorn[standard]"` would add: uvicorn picks them up
# automatically (--loop auto, --http auto), which makes it faster.
set -e
apt-get install -y python3-fastapi python3-uvicorn python3-xgboost python3-numpy \
	python3-uvloop python3-httptools
/usr/bin/python3 -c 'import fastapi, uvicorn, xgboost; print("fastapi", fastapi.__version__, "uvicorn", uvicorn.__version__, "xgboost", xgboost.__version__)'
