"""docs/fleet-scale.md prints every calibration figure's residual: the table must be the model's
own (tests/plan/calibration_runs.py), so a constant moved without the docs fails here."""

from pathlib import Path

from tests.plan.calibration_runs import figures

DOC = Path(__file__).resolve().parents[2] / "docs" / "fleet-scale.md"


def _residual_table() -> dict[str, tuple[float, float]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### The calibration runs and the residuals", 1)[1]
    rows: dict[str, tuple[float, float]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] != "figure":
            rows[cells[0]] = (float(cells[1].replace(",", "")), float(cells[2]))
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_docs_residual_table_is_the_models() -> None:
    table = _residual_table()
    model = figures()
    assert set(table) == set(model)
    for name, (model_value, published) in model.items():
        doc_published, doc_ratio = table[name]
        assert doc_published == published, name
        assert doc_ratio == round(model_value / published, 3), name
