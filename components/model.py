"""Moved to ``components.resolved`` (the resolved model) and ``components.naming`` (label and taint keys). This name
stays only until the branches written against it have merged; import from those modules."""

from components.naming import POOL_LABEL as POOL_LABEL
from components.naming import WORKLOAD_LABEL as WORKLOAD_LABEL
from components.naming import Vendor as Vendor
from components.resolved.model import PlatformModel as PlatformModel
from components.resolved.model import ResolvedPool as ResolvedPool
from components.resolved.model import resolve as resolve
