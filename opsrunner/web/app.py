"""The dashboard's routes: HTML pages (Jinja2, autoescaped) and the JSON API with the same
content. Read-only: every route is a GET, the database is opened read-only per request."""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from opsrunner.errors import OpsrunnerError
from opsrunner.history.backend import NoHistory
from opsrunner.history.location import display
from opsrunner.history.sqlite_backend import SQLiteBackend
from opsrunner.history.store import RESULTS, HistoryStore, RunFilter, RunRow
from opsrunner.web import charts, data

HERE = Path(__file__).resolve().parent
TOKEN_COOKIE = "opsrunner_token"
#: Scripts and styles from this server only: a value that slipped past escaping could not run.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Dashboard:
    #: A SQLite file or a postgresql:// URL (history/location.py).
    history: Path | str
    schedules: Path
    #: None: no token asked (only on a loopback address).
    token: str | None = None


class BadRequest(Exception):
    """A query parameter the API cannot use: 400 with the reason."""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.globals["sparkline"] = charts.sparkline
    return env


def create_app(config: Dashboard) -> Starlette:
    routes = [
        Route("/", index), Route("/runs/{run_id}", run_page), Route("/schedules", schedules_page),
        Route("/hosts", hosts_page), Route("/api/runs", api_runs), Route("/api/runs/{run_id}", api_run),
        Route("/api/schedules", api_schedules), Route("/api/hosts", api_hosts),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(BaseHTTPMiddleware, dispatch=_guard(config.token))]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={
        BadRequest: _bad_request, sqlite3.Error: _database_error, OpsrunnerError: _files_error, 404: _not_found})
    app.state.config = config
    app.state.templates = _environment()
    return app


# -- the routes (sync: Starlette runs them in its thread pool, each with its own connection) --
def index(request: Request) -> Response:
    return _page(request, "runs.html", **_runs_content(request), results=RESULTS)


def api_runs(request: Request) -> Response:
    content = _runs_content(request)
    del content["charts"]
    return JSONResponse(content)


def run_page(request: Request) -> Response:
    run, candidates = _find_run(request)
    if run is None:
        return _page(request, "missing.html", 404, run_id=request.path_params["run_id"], candidates=candidates)
    return _page(request, "run.html", run=data.run_detail(run))


def api_run(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    run, candidates = _find_run(request)
    if run is None:
        why = f"run id prefix {run_id!r} is ambiguous" if candidates else f"no run {run_id!r}"
        return JSONResponse({"error": why, "candidates": candidates}, status_code=404)
    return JSONResponse(data.run_detail(run))


def schedules_page(request: Request) -> Response:
    return _page(request, "schedules.html", schedules=_read(request, _schedules))


def api_schedules(request: Request) -> Response:
    return JSONResponse({"schedules": _read(request, _schedules)})


def _schedules(store: HistoryStore, config: Dashboard) -> list[dict[str, Any]]:
    return data.schedules(store, config.history, config.schedules)


def hosts_page(request: Request) -> Response:
    return _page(request, "hosts.html", hosts=_read(request, lambda store, _: data.hosts(store)))


def api_hosts(request: Request) -> Response:
    return JSONResponse({"hosts": _read(request, lambda store, _: data.hosts(store))})


T = TypeVar("T")


def _read(request: Request, query: Callable[[HistoryStore, Dashboard], T]) -> T:
    """`query` over a read-only connection of this request's own."""
    config: Dashboard = request.app.state.config
    try:
        store = HistoryStore(config.history, busy_timeout_s=5.0, read_only=True)
    except NoHistory:  # no run recorded there yet: shown empty until a run creates it
        store = HistoryStore(SQLiteBackend.empty(display(config.history)))
    try:
        return query(store, config)
    finally:
        store.close()


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    templates: jinja2.Environment = request.app.state.templates
    return HTMLResponse(templates.get_template(name).render(**context), status_code=status)


def _runs_content(request: Request) -> dict[str, Any]:
    filters, page_number = _filters(request)
    return _read(request, lambda store, _: {**data.runs_page(store, filters, page_number),
                                            "charts": data.durations(store)})


def _find_run(request: Request) -> tuple[RunRow | None, list[str]]:
    """The run of the path's id (an id, a unique prefix or suffix, or `last`), or the ids it matches."""
    run_id = request.path_params["run_id"]

    def find(store: HistoryStore, _: Dashboard) -> tuple[RunRow | None, list[str]]:
        found_id = store.last_run_id() if run_id == "last" else run_id
        run = store.run(found_id) if found_id else None
        return run, [] if run else store.candidates(run_id)

    return _read(request, find)


def _filters(request: Request) -> tuple[RunFilter, int]:
    q = request.query_params
    result = q.get("result") or None
    if result is not None and result not in RESULTS:
        raise BadRequest(f"result must be one of {', '.join(RESULTS)}")
    try:
        page_number = int(q.get("page") or 1)
    except ValueError:
        raise BadRequest("page must be a number") from None
    if page_number < 1:
        raise BadRequest("page must be 1 or more")
    return RunFilter(playbook=q.get("playbook") or None, host=q.get("host") or None,
                     schedule=q.get("schedule") or None, result=result), page_number


Dispatch = Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]


def _guard(token: str | None) -> Dispatch:
    """Every request: GET or HEAD only, the token where one is asked, the security headers."""

    async def dispatch(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method not in ("GET", "HEAD"):
            response: Response = JSONResponse({"error": "the dashboard is read-only"}, status_code=405,
                                              headers={"Allow": "GET, HEAD"})
        elif token is not None and not _authorized(request, token):
            response = JSONResponse({"error": "a token is required (Authorization: Bearer TOKEN or ?token=TOKEN)"},
                                    status_code=401)
        else:
            response = await call_next(request)
            if token is not None and "token" in request.query_params:  # the browser keeps it for the next pages
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        response.headers.update(SECURITY_HEADERS)
        return response

    return dispatch


def _authorized(request: Request, token: str) -> bool:
    header = request.headers.get("authorization", "")
    offered = [header[7:] if header.lower().startswith("bearer ") else "",
               request.cookies.get(TOKEN_COOKIE, ""), request.query_params.get("token", "")]
    expected = token.encode()
    return any(hmac.compare_digest(value.encode(), expected) for value in offered if value)


async def _bad_request(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=400)


async def _database_error(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"cannot read the run history: {type(exc).__name__}: {exc}"}, status_code=503)


async def _files_error(request: Request, exc: Exception) -> Response:
    """A schedule file that does not load (edited by hand): its problem, as `schedule list` says it."""
    return JSONResponse({"error": str(exc)}, status_code=500)


async def _not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"no such page: {request.url.path}"}, status_code=404)
