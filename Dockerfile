# syntax=docker/dockerfile:1
# sre-judge: the HTTP service and its command line, on a slim Python base, as a non-root user.
# Build: docker build -t sre-judge .   Run with PostgreSQL and Ollama: docker compose up (README).

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/sre-judge
COPY pyproject.toml README.md ./
COPY judge ./judge
COPY storage ./storage
COPY api ./api
COPY client/src ./client/src
RUN /opt/sre-judge/bin/pip install --no-cache-dir .

FROM python:3.11-slim-bookworm
ENV PATH=/opt/sre-judge/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SRE_JUDGE_HOST=0.0.0.0 \
    SRE_JUDGE_PORT=8000 \
    SRE_JUDGE_RUBRIC_DIR=/usr/share/sre-judge/rubrics \
    SRE_JUDGE_FAILURE_TAGS_FILE=/usr/share/sre-judge/vocabularies/failure-tags.yaml
RUN groupadd --system --gid 10001 sre-judge \
    && useradd --system --uid 10001 --gid sre-judge --home-dir /var/lib/sre-judge \
       --create-home --shell /usr/sbin/nologin sre-judge \
    && install -d -o 10001 -g 10001 /var/lib/sre-judge/checkpoints
COPY --from=build /opt/sre-judge /opt/sre-judge
COPY rubrics /usr/share/sre-judge/rubrics
COPY vocabularies /usr/share/sre-judge/vocabularies
# the working directory holds the SQLite file when no SRE_JUDGE_DATABASE_URL is given
WORKDIR /var/lib/sre-judge
USER 10001:10001
EXPOSE 8000
# liveness only (the process answers); /readyz also needs the database and the judge
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SRE_JUDGE_PORT', '8000'), timeout=4)"]
# SIGTERM: stop claiming, finish or release in-flight gradings within SRE_JUDGE_SHUTDOWN_SECONDS
STOPSIGNAL SIGTERM
ENTRYPOINT ["sre-judge"]
CMD ["serve"]
