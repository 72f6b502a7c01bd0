"""ReFrame's command line, without the price of the deprecation warnings it ignores.

ReFrame 4.10 asks for a deprecation warning twice for every test it instantiates (its
deprecated ``variables`` alias of ``env_vars`` is read and set while each test's variables
are injected) and ignores both (``suppress_deprecations``). Its
``user_deprecation_warning`` walks the whole stack with ``inspect.stack()``, reading every
frame's source, before the warning filter drops the warning: on the embedded cluster's 137
variants that was 5–7 s of the 8–11 s ReFrame spent loading checks, paid by every
`perfguard run` (and by every nightly of a site, whose library is larger).

Here the warning is asked for only when a filter would show it; a warning that would show
is issued by ReFrame's own function, unchanged. Where ReFrame's internals differ (another
version), nothing is replaced.
"""

import sys
import warnings
from collections.abc import Callable


def _ignored(category: type[Warning]) -> bool:
    """Whether the warning filters, first match first, drop every warning of this
    category (filters on a message or a module are not read: those warnings are asked for)."""
    for action, message, filtered, module, _line in warnings.filters:
        if message is None and module is None and issubclass(category, filtered):
            return action == "ignore"
    return False


def cheap_deprecations() -> int:
    """Replace ReFrame's ``user_deprecation_warning`` in every ReFrame module that imported
    it with one that returns at once where the warning would be ignored. Returns how many
    modules took it."""
    import reframe.core.warnings as rfm_warnings
    import reframe.frontend.cli  # noqa: F401  (imports every module that takes it)

    original: Callable[..., None] = rfm_warnings.user_deprecation_warning
    category = rfm_warnings.ReframeDeprecationWarning

    def user_deprecation_warning(message: str, from_version: str = "0.0.0") -> None:
        if not _ignored(category):
            original(message, from_version)

    replaced = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("reframe") and \
                getattr(module, "user_deprecation_warning", None) is original:
            module.user_deprecation_warning = user_deprecation_warning
            replaced += 1
    return replaced


def main() -> None:
    """``python -m perfguard.run.reframe_cli ARGS``: ReFrame's ``reframe ARGS``."""
    cheap_deprecations()
    from reframe.frontend.cli import main as reframe_main
    sys.argv[0] = "reframe"
    sys.exit(reframe_main())


if __name__ == "__main__":
    main()
