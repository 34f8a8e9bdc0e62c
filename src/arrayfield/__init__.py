"""arrayfield: annotation-driven array fields for equinox Modules.

`eqx.filter_jit` hashes every non-array leaf into its cache key, so a Module field
holding a Python number recompiles on every new value. `af.ArrayModule` reads each
field's annotation and stores scalars in array-annotated fields as strongly typed
arrays, so a `filter_jit` loop traces once.
"""

from ._errors import AnnotationWarning as AnnotationWarning
from ._errors import ConversionError as ConversionError
from ._module import ArrayModule as ArrayModule
from ._module import field as field
from ._module import normalize as normalize
from ._validate import ValidationError as ValidationError

__version__ = "0.1.0"
