"""Multi-join data-search questions: the source study's form of the family, over our own shop database.

Under the cell's ``data_questions: multi-join`` the data-search episodes play these tasks
(``dataj-NN``, as many as the simple questions, so a sequence maps one to one) instead of
``data-NN``. Each is a search over at least two joined tables with several conditions, most with an
``EXISTS`` (or ``NOT EXISTS``) subquery, as the source study's search prompts are. The answer is the
source study's: a JSON array of objects, one per matching row, each with exactly the question's
answer key columns (``validation`` refuses anything else). Reference answers are computed by the
reference SQL over the database built from ``data.DB_SEED``, so they are deterministic; a filling is
kept only when it matches 2-20 rows (two or more, so a near-miss answer stays well formed).
"""
from __future__ import annotations

import random
from typing import Any

from workbench.seeding import rng_for

from .base import Task
from .data import (
    CATEGORIES,
    DB_NAME,
    DB_SEED,
    FAMILY,
    PLACES,
    ROW_CAP,
    STATUSES,
    Question,
    Template,
    query_shared,
    register_questions,
)

PREFIX = "dataj-"
MIN_ROWS, MAX_ROWS = 2, 20
ANSWER_FORMAT = ("JSON array of objects, one per matching row, each with exactly the answer key columns, "
                 'e.g. [{"order_id": 12}, {"order_id": 40}] (row order does not matter)')

HALF_YEARS = (("2023-01-01", "2023-06-30"), ("2023-07-01", "2023-12-31"), ("2024-01-01", "2024-06-30"),
              ("2024-07-01", "2024-12-31"))
STATUS_PAIRS = (("delivered", "shipped"), ("shipped", "returned"), ("delivered", "cancelled"),
                ("cancelled", "returned"))

TEMPLATES: tuple[Template, ...] = (
    Template("orders_with_category",
             "Find the orders placed from {start} through {end} by customers in {country} that are {status_a} or "
             "{status_b} and contain at least one {category} product.",
             "SELECT o.id AS order_id FROM orders o JOIN customers c ON c.id = o.customer_id "
             "WHERE o.order_date BETWEEN :start AND :end AND c.country = :country "
             "AND o.status IN (:status_a, :status_b) AND EXISTS (SELECT 1 FROM order_items i "
             "JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id AND p.category = :category)",
             ("order_id",), ("order_id",), objects=True),
    Template("customers_bought_price",
             "Find the customers living in {city_a} or {city_b} who joined before {date} and have a {status} "
             "order containing a product priced at least {price} euros.",
             "SELECT c.id AS customer_id FROM customers c WHERE c.city IN (:city_a, :city_b) AND c.joined < :date "
             "AND EXISTS (SELECT 1 FROM orders o JOIN order_items i ON i.order_id = o.id "
             "JOIN products p ON p.id = i.product_id WHERE o.customer_id = c.id AND o.status = :status "
             "AND p.price >= :price)",
             ("customer_id",), ("customer_id",), objects=True),
    Template("order_lines",
             "Find the order lines (order and product) with quantity at least {qty} of {category} products, in "
             "orders placed in {year} by customers in {country}.",
             "SELECT i.order_id, i.product_id FROM order_items i JOIN orders o ON o.id = i.order_id "
             "JOIN customers c ON c.id = o.customer_id JOIN products p ON p.id = i.product_id "
             "WHERE i.quantity >= :qty AND p.category = :category AND substr(o.order_date, 1, 4) = :year "
             "AND c.country = :country",
             ("order_id", "product_id"), ("order_id", "product_id"), objects=True),
    Template("products_ordered_from",
             "Find the {category} products priced under {price} euros that customers in {country} ordered in "
             "{year} in an order that is {status}.",
             "SELECT p.id AS product_id FROM products p WHERE p.category = :category AND p.price < :price "
             "AND EXISTS (SELECT 1 FROM order_items i JOIN orders o ON o.id = i.order_id "
             "JOIN customers c ON c.id = o.customer_id WHERE i.product_id = p.id AND c.country = :country "
             "AND substr(o.order_date, 1, 4) = :year AND o.status = :status)",
             ("product_id",), ("product_id",), objects=True),
    Template("customers_without_category",
             "Find the customers in {country} who have at least one {status} order but never ordered any "
             "{category} product.",
             "SELECT c.id AS customer_id FROM customers c WHERE c.country = :country "
             "AND EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.status = :status) "
             "AND NOT EXISTS (SELECT 1 FROM orders o2 JOIN order_items i ON i.order_id = o2.id "
             "JOIN products p ON p.id = i.product_id WHERE o2.customer_id = c.id AND p.category = :category)",
             ("customer_id",), ("customer_id",), objects=True),
    Template("large_orders",
             "Find the orders placed in {year} by customers who joined in {joined} whose items add up to at "
             "least {units} units.",
             "SELECT o.id AS order_id FROM orders o JOIN customers c ON c.id = o.customer_id "
             "JOIN order_items i ON i.order_id = o.id WHERE substr(o.order_date, 1, 4) = :year "
             "AND substr(c.joined, 1, 4) = :joined GROUP BY o.id HAVING SUM(i.quantity) >= :units",
             ("order_id",), ("order_id",), objects=True),
)
PER_TEMPLATE = {"orders_with_category": 10, "customers_bought_price": 9, "order_lines": 9,
                "products_ordered_from": 9, "customers_without_category": 8, "large_orders": 8}


def _same(slots: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    return {k: str(v) for k, v in slots.items()}, dict(slots)


def _candidates(t: Template, rng: random.Random) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """Slot fillings to try for one template, in a seeded order."""
    countries = sorted({c for _, c in PLACES})
    cities = [c for c, _ in PLACES]
    out: list[tuple[dict[str, str], dict[str, Any]]] = []
    if t.key == "orders_with_category":
        out = [_same({"start": s, "end": e, "country": c, "status_a": a, "status_b": b, "category": k})
               for s, e in HALF_YEARS for c in countries for a, b in STATUS_PAIRS for k in CATEGORIES]
    elif t.key == "customers_bought_price":
        out = [_same({"city_a": a, "city_b": b, "date": d, "status": s, "price": p})
               for i, a in enumerate(cities) for b in cities[i + 1:] for d in ("2022-01-01", "2022-07-01", "2023-01-01")
               for s in STATUSES[:2] for p in (60, 100, 140)]
    elif t.key == "order_lines":
        out = [_same({"qty": q, "category": k, "year": y, "country": c})
               for q in (2, 3) for k in CATEGORIES for y in ("2023", "2024") for c in countries]
    elif t.key == "products_ordered_from":
        out = [_same({"category": k, "price": p, "country": c, "year": y, "status": s})
               for k in CATEGORIES for p in (60, 100, 140) for c in countries for y in ("2023", "2024")
               for s in STATUSES[:2]]
    elif t.key == "customers_without_category":
        out = [_same({"country": c, "status": s, "category": k}) for c in countries for s in STATUSES
               for k in CATEGORIES]
    elif t.key == "large_orders":
        out = [_same({"year": y, "joined": j, "units": u}) for y in ("2023", "2024") for j in ("2021", "2022", "2023")
               for u in (4, 5, 6, 7, 8)]
    rng.shuffle(out)
    return out


def make_questions() -> list[Question]:
    """:data:`PER_TEMPLATE` questions per template whose answers have 2-20 rows (deterministic)."""
    questions: list[Question] = []
    for t in TEMPLATES:
        want = PER_TEMPLATE[t.key]
        taken = 0
        for slots, params in _candidates(t, rng_for(DB_SEED, "multi-join questions", t.key)):
            if MIN_ROWS <= len(query_shared(t.sql, params)) <= min(MAX_ROWS, ROW_CAP):
                questions.append(Question(t, slots, params))
                taken += 1
                if taken == want:
                    break
        if taken < want:
            raise RuntimeError(f"multi-join data questions: template {t.key} has only {taken} usable fillings")
    return questions


def task_id_for(index: int) -> str:
    return f"{PREFIX}{index:02d}"


def _build() -> tuple[dict[str, Task], dict[str, Question]]:
    tasks: dict[str, Task] = {}
    questions: dict[str, Question] = {}
    for i, q in enumerate(make_questions(), start=1):
        task_id = task_id_for(i)
        keys = ", ".join(q.template.columns)
        brief = (f"Task family: {FAMILY}\n"
                 f"Task: answer this search from the shop database. Search: {q.text()}\n"
                 f"Answer key columns: {keys}\n"
                 f"Database: /task/{DB_NAME} (SQLite; tables customers, products, orders, order_items)\n"
                 f"Tools: list_tables(), describe_table(name), run_sql(query) (one read-only SELECT, at most "
                 f"{ROW_CAP} rows shown)\n"
                 f"Answer: save_final_answer with a JSON array of objects, one per matching row, each carrying "
                 f"exactly the answer key columns.")
        peer = (f"Data search: answer a search over a SQLite shop database with rows. Search: {q.text()} "
                f"Answer key columns: {keys}. The answer is a JSON array of objects with exactly those columns.")
        tasks[task_id] = Task(task_id, FAMILY, brief, peer, ANSWER_FORMAT, task_id)
        questions[task_id] = q
    return tasks, questions


TASKS, QUESTIONS = _build()
register_questions(QUESTIONS)
