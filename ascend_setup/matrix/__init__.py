"""The compatibility matrix: models, loading, whole-row selection."""

from ascend_setup.matrix.load import load_matrix, parse_matrix, select_row
from ascend_setup.matrix.models import MIRROR, Matrix, Row

__all__ = ["MIRROR", "Matrix", "Row", "load_matrix", "parse_matrix", "select_row"]
