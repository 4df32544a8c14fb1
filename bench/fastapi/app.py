"""FastAPI baseline for docs/benchmarks.md (issue 3, benchmark 5).

What a user might write instead of Sluice: the fraud example's XGBoost model
(examples/fraud/model.json) loaded with xgboost and served by FastAPI on
uvicorn, with the same request and response JSON as Sluice's
POST /v1/models/fraud:predict and the same preprocessing as
examples/fraud/model.yaml:

    [log1p(amount), accountAgeDays, declines5m (NaN if absent),
     country==US, country==GB, country==DE (all three NaN if absent)]

Run (one worker, pinned to core 0):

    FRAUD_MODEL=examples/fraud/model.json taskset -c 0 /usr/bin/python3 -m uvicorn \
        --app-dir bench/fastapi app:app --host 127.0.0.1 --port 18092 \
        --workers 1 --no-access-log --log-level warning
"""
import math
import os
from typing import List, Literal, Optional

import numpy as np
import xgboost as xgb
from fastapi import FastAPI, Request
from pydantic import BaseModel, confloat, conint

MODEL = os.environ.get("FRAUD_MODEL", "examples/fraud/model.json")
COUNTRIES = ["US", "GB", "DE"]

booster = xgb.Booster()
booster.load_model(MODEL)
booster.set_param({"nthread": 1})


class Instance(BaseModel):
    amount: confloat(ge=0)
    accountAgeDays: conint(ge=0)
    declines5m: Optional[conint(ge=0)] = None
    country: Optional[Literal["US", "GB", "DE"]] = None


class PredictRequest(BaseModel):
    instances: List[Instance]
    deadlineMs: Optional[int] = None


def features(inst: Instance) -> List[float]:
    row = [math.log1p(inst.amount), float(inst.accountAgeDays),
           math.nan if inst.declines5m is None else float(inst.declines5m)]
    if inst.country is None:
        row += [math.nan] * 3
    else:
        row += [1.0 if inst.country == c else 0.0 for c in COUNTRIES]
    return row


app = FastAPI()


@app.post("/v1/models/fraud:predict")
async def predict(req: PredictRequest, request: Request):
    x = np.array([features(i) for i in req.instances], dtype=np.float32)
    p = booster.inplace_predict(x, missing=np.nan)
    return {
        "predictions": [{"riskScore": float(np.float32(v))} for v in p],
        "modelVersion": "fraud@1",
        "schemaVersion": "fraud-input@3",
        "requestId": request.headers.get("x-request-id", ""),
    }
