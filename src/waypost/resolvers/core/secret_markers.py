"""Credentials pasted into text the service keeps for good.

The lifecycle API refuses them wherever they appear in a memo or its
documents (lifecycle-model.md "Secret markers"); the task domain refuses
them in a publication result's `detail`, which its events keep, and events
are never rewritten (service-contract section 10: `data` never holds
credentials).
"""

from __future__ import annotations

import re

# lifecycle-model.md "Secret markers": refused wherever they appear in the memo
# or in UTF-8 document content. Besides PEM's private-key headers, OpenPGP's
# armor for one (`-----BEGIN PGP PRIVATE KEY BLOCK-----`): not PEM by name,
# but a private key all the same (a choice beyond the model; docs/lifecycle.md).
# Two more choices: `password=`, `secret=` and `token=` in any letter case
# (`PASSWORD=` in a pasted .env file passed), and Waypost's own API tokens
# (`wp_` and the 43 characters of `ids.new_token`).
SECRET_MARKERS = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"|AKIA[A-Z0-9]{16}"
    r"|gh[pos]_[A-Za-z0-9]{36}"
    r"|xox[abprs]-"
    r"|sk-[A-Za-z0-9]{20,}"
    r"|(?i:password|secret|token)=\S{8,}"
    # exactly a token's length: `wp_ajax_nopriv_woocommerce_checkout_...` is none
    r"|(?<![A-Za-z0-9_-])wp_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"
)


def has_secret(text: str) -> bool:
    return SECRET_MARKERS.search(text) is not None
