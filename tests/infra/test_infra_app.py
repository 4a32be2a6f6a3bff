"""`python app.py` synthesizes offline, with no AWS credentials, and rejects bad context."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra import REPO_ROOT, constants
from infra.template import run_app
from sagewarden import keys


@pytest.mark.claim("No Docker.")
@pytest.mark.claim("synthesize offline into cdk.out/ (no credentials)")
def test_app_synthesizes_offline_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # run_app passes the subprocess PATH/HOME-like variables only (no AWS_* credentials,
    # profiles, CDK_DEFAULT_ACCOUNT/REGION); an empty HOME means no ~/.aws either.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    run_app(tmp_path / "out")

    template = json.loads((tmp_path / "out" / f"{constants.STACK_ID}.template.json").read_text())
    (sagemaker_rule,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Events::Rule"
        and r["Properties"].get("EventPattern", {}).get("source") == ["aws.sagemaker"]
    ]
    assert sagemaker_rule["Properties"]["EventPattern"]["detail"] == {
        "TrainingJobName": [{"prefix": f"{keys.DEFAULT_JOB_PREFIX}-"}]
    }
    report = json.loads((tmp_path / "out" / "validation-report.json").read_text())
    assert report["pluginReports"] == []  # cdk-nag ran inside the app and found nothing


def test_app_rejects_invalid_context_with_a_clear_message(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps({"jobPrefix": "Bad_"}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }

    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert proc.returncode == 2
    assert "jobPrefix" in proc.stderr
    assert not (tmp_path / f"{constants.STACK_ID}.template.json").exists()
