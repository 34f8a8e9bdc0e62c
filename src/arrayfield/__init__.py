"""arrayfield: annotation-driven array fields for equinox Modules.

`eqx.filter_jit` hashes every non-array leaf into its cache key, so a Module field
holding a Python number recompiles on every new value. `af.ArrayModule` reads each
field's annotation and stores scalars in array-annotated fields as strongly typed
arrays, so a `filter_jit` loop traces once.
"""

from ._audit import AuditError as AuditError
from ._audit import Finding as Finding
from ._audit import Findings as Findings
from ._audit import assert_clean as assert_clean
from ._audit import audit as audit
from ._errors import AnnotationWarning as AnnotationWarning
from ._errors import ConversionError as ConversionError
from ._module import ArrayModule as ArrayModule
from ._module import field as field
from ._module import normalize as normalize
from ._retrace import RetraceWarning as RetraceWarning
from ._retrace import TraceReuseWarning as TraceReuseWarning
from ._retrace import explain_retraces as explain_retraces
from ._validate import ValidationError as ValidationError

__version__ = "0.1.0"
