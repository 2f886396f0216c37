"""Avro records through Kafka as Python's own clients write and read them
(confluent-kafka's AvroSerializer and AvroDeserializer against a schema
registry), for the tests of Weir's `avro` format.

    produce BROKERS REGISTRY TOPIC SCHEMA_FILE < records.jsonl
    consume BROKERS REGISTRY TOPIC COUNT > records.jsonl

A record's `amount` is a decimal (given and printed as a string with its
digits) and `at` a timestamp (given and printed as milliseconds since the
epoch); every other field is as JSON has it.
"""

import datetime
import decimal
import json
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def to_python(record):
    record = dict(record)
    record["amount"] = decimal.Decimal(record["amount"])
    record["at"] = EPOCH + datetime.timedelta(milliseconds=record["at"])
    return record


def to_json(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    raise TypeError(f"cannot print {value!r}")


def produce(brokers, registry, topic, schema_file):
    with open(schema_file) as f:
        schema = f.read()
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), schema)
    producer = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})
    context = SerializationContext(topic, MessageField.VALUE)
    for line in sys.stdin:
        record = to_python(json.loads(line))
        value = serializer(record, context)
        producer.produce(topic, key=str(record["id"]).encode(), value=value)
        producer.poll(0)
    producer.flush(30)


def consume(brokers, registry, topic, count):
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": "avro-clients",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    context = SerializationContext(topic, MessageField.VALUE)
    seen = 0
    idle = 0
    while seen < count and idle < 60:
        message = consumer.poll(1.0)
        if message is None:
            idle += 1
            continue
        if message.error():
            raise SystemExit(f"consumer error: {message.error()}")
        idle = 0
        record = deserializer(message.value(), context)
        print(json.dumps(record, default=to_json, sort_keys=True), flush=True)
        seen += 1
    consumer.close()


if __name__ == "__main__":
    verb, args = sys.argv[1], sys.argv[2:]
    if verb == "produce":
        produce(*args)
    elif verb == "consume":
        consume(args[0], args[1], args[2], int(args[3]))
    else:
        raise SystemExit(f"unknown verb {verb}")
