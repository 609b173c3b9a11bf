"""Request schemas in the OpenAPI document exactly as the server validates them.

Litestar's generator drops part of what a pydantic model enforces: patterns, exclusive
bounds (``gt=0``), ``extra="forbid"`` (no ``additionalProperties: false``), the type of
``dict[str, Literal[...]]``. A client generated from such a document, or a property-based
tester, sends bodies the server then refuses. :func:`document_request_bodies` replaces
the schema of every request body model (and the models it nests) with pydantic's own, in
validation mode, so the document states the rules the server applies; a body the route
parses itself (a file) has its JSON form's model documented the same way.

:func:`forbid_nul` adds what the input guard refuses everywhere
(:mod:`api.http.input_guard`): no string, and no key of an object, may hold a NUL
character.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import Components, Reference, Schema
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

__all__ = ["METHODS", "NO_NUL", "document_request_bodies", "forbid_nul", "operations"]

#: the pattern of every free-text string the API takes (PostgreSQL stores no NUL)
NO_NUL = "^[^\\u0000]*$"
_REF_TEMPLATE = "#/components/schemas/{model}"
#: the methods of a path item the document describes (a route may answer ``HEAD`` alone)
METHODS = ("get", "put", "post", "delete", "patch", "head")


def _body_model(handler: HTTPRouteHandler) -> type[BaseModel] | None:
    """The model of the handler's JSON body: its ``data`` parameter's, or the one its
    operation class documents for a body the route parses itself (``json_body``, see
    :func:`api.http.uploads.file_operation`)."""
    field = handler.parsed_fn_signature.parameters.get("data")
    annotation = getattr(field, "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    documented = getattr(handler.operation_class, "json_body", None)
    return documented if isinstance(documented, type) else None


def operations(
    app: Litestar, handlers: dict[str, HTTPRouteHandler]
) -> Iterator[tuple[str, str, Any, HTTPRouteHandler]]:
    """Each operation of ``app``'s document with its path, method and route handler
    (``handlers``: by operation id), ``HEAD`` included."""
    for path, item in (app.openapi_schema.paths or {}).items():
        for method in METHODS:
            operation = getattr(item, method, None)
            handler = handlers.get(str(getattr(operation, "operation_id", "")))
            if operation is not None and handler is not None:
                yield path, method, operation, handler


def document_request_bodies(app: Litestar, handlers: dict[str, HTTPRouteHandler]) -> None:
    """Give every JSON request body pydantic's validation schema of its model
    (``handlers``: the app's route handlers by operation id)."""
    components = app.openapi_schema.components
    if not isinstance(components, Components):  # pragma: no cover - Litestar makes one
        return
    bodies = [
        (operation, model)
        for _, _, operation, handler in operations(app, handlers)
        if operation.request_body is not None and (model := _body_model(handler)) is not None
    ]
    models = list(dict.fromkeys(model for _, model in bodies))
    refs, definitions = models_json_schema(
        [(model, "validation") for model in models], ref_template=_REF_TEMPLATE
    )
    schemas: dict[str, Any] = dict(components.schemas or {})
    for name, schema in definitions.get("$defs", {}).items():
        schemas[name] = forbid_nul(schema)
    components.schemas = schemas
    for operation, model in bodies:
        media = operation.request_body.content.get("application/json")
        if media is not None:
            media.schema = Reference(ref=refs[(model, "validation")]["$ref"])


def forbid_nul(schema: Any) -> Any:
    """``schema`` (a JSON Schema dict or Litestar ``Schema``) with :data:`NO_NUL` on every
    string that has no pattern, format or enum of its own, and on the keys of every
    object that takes keys it does not name (a map, ``additionalProperties`` a schema,
    true or absent)."""
    if isinstance(schema, Schema):
        if _plain_string(schema.type, schema.pattern, schema.format, schema.enum, schema.const):
            schema.pattern = NO_NUL
        if (
            _open_object(schema.type, schema.additional_properties)
            and schema.property_names is None
        ):
            schema.property_names = Schema(pattern=NO_NUL)
        for child in (
            *(schema.one_of or ()),
            *(schema.any_of or ()),
            *(schema.all_of or ()),
            *(schema.properties or {}).values(),
            schema.items,
            schema.additional_properties,
        ):
            forbid_nul(child)
        return schema
    if isinstance(schema, dict):
        if _plain_string(
            schema.get("type"),
            schema.get("pattern"),
            schema.get("format"),
            schema.get("enum"),
            schema.get("const"),
        ):
            schema["pattern"] = NO_NUL
        if _open_object(schema.get("type"), schema.get("additionalProperties")):
            schema.setdefault("propertyNames", {"pattern": NO_NUL})  # keys are strings too
        for value in schema.values():
            forbid_nul(value)
    elif isinstance(schema, list):
        for value in schema:
            forbid_nul(value)
    return schema


def _plain_string(kind: Any, pattern: Any, format_: Any, enum: Any, const: Any) -> bool:
    is_string = kind == "string" or getattr(kind, "value", None) == "string"
    return is_string and not (pattern or format_ or enum or const is not None)


def _open_object(kind: Any, additional: Any) -> bool:
    """Whether a schema of type ``kind`` with ``additional`` as its
    ``additionalProperties`` takes keys it does not name: a map, or an object that
    states no ``additionalProperties: false``."""
    if additional is not None and additional is not True:
        return additional is not False  # a schema (dict, Schema or Reference): a map
    return kind == "object" or getattr(kind, "value", None) == "object"
