# Prometheus from Debian's package, for deploy/compose/compose.yaml: the
# stack builds every image it runs from Debian packages, so it comes up
# without an image registry (deploy/container-check.sh). With a registry,
# an upstream Prometheus image works the same with the mounts of compose.yaml.
FROM debian:bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o prometheus -g prometheus /prometheus
USER prometheus
VOLUME /prometheus
EXPOSE 9090
ENTRYPOINT ["prometheus", "--config.file=/etc/prometheus/prometheus.yml", \
            "--storage.tsdb.path=/prometheus", \
            "--web.listen-address=0.0.0.0:9090"]
