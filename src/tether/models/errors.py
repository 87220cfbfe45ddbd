"""Errors of the model layer.

    TetherError                          (tether.core.errors)
    └── ModelError                       code "model"
        ├── ModelConfigError             "model_config"        bad rules, templates or client options
        ├── ModelConnectionError         "model_connection"    could not reach the server (after retries)
        ├── ModelTimeoutError            "model_timeout"       no response within ``timeout``
        ├── ModelHTTPError               "model_http"          a non-2xx status (after retries for 429/5xx)
        └── ModelBadResponseError        "model_bad_response"  a 2xx body that is not a chat completion
            └── ModelBadArgumentsError   "model_bad_arguments" tool-call arguments that are not a JSON object

Details travel in ``.details`` (and pickle with the error); the properties below
read the common ones.
"""

from __future__ import annotations

from typing import ClassVar

from ..core.errors import TetherError


class ModelError(TetherError):
    """Root of the model layer's errors."""

    default_code: ClassVar[str] = "model"


class ModelConfigError(ModelError):
    """A scripted rule, a template or a client option is invalid. Fix the configuration."""

    default_code = "model_config"


class ModelConnectionError(ModelError):
    """The model server could not be reached, even after retries."""

    default_code = "model_connection"


class ModelTimeoutError(ModelError):
    """The model server did not answer within the client's ``timeout``."""

    default_code = "model_timeout"


class ModelHTTPError(ModelError):
    """The model server answered with a non-2xx status.

    ``status`` is the HTTP status; ``details["body"]`` the start of the response body.
    """

    default_code = "model_http"

    @property
    def status(self) -> int | None:
        v = self.details.get("status")
        return v if isinstance(v, int) else None


class ModelBadResponseError(ModelError):
    """The model server answered 2xx with something that is not a usable chat completion."""

    default_code = "model_bad_response"


class ModelBadArgumentsError(ModelBadResponseError):
    """The model produced tool-call arguments that are not a JSON object.

    ``details`` carry ``tool`` (the tool name), ``tool_call_id`` and ``arguments``
    (the raw string), so a caller can feed the problem back to the model.
    """

    default_code = "model_bad_arguments"
