-- The breadth corpus: analytic queries over bench/breadth/tables.sql as a data engineer
-- writes them (reports with CTEs, rankings per partition, year-over-year comparisons by
-- self-joins of CTEs, set operations, rollups, nested derived tables), each a view.
-- Views are unordered (no top-level ORDER BY); every output column has its own name.
-- `bench/breadth_bench.py` checks each against its query from scratch after every step.

-- ---------------------------------------------------------------------------------------
-- Joins and GROUP BY
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW sales_by_year_state AS
SELECT d_year, s_state, SUM(ss_ext_sales_price) AS revenue, SUM(ss_net_profit) AS profit,
  COUNT(*) AS lines
FROM store_sales
JOIN date_dim ON ss_sold_date_sk = d_date_sk
JOIN store ON ss_store_sk = s_store_sk
GROUP BY d_year, s_state;

CREATE MATERIALIZED VIEW category_monthly_sales AS
SELECT d_year, d_moy, i_category, SUM(ss_ext_sales_price) AS revenue,
  AVG(ss_quantity) AS avg_quantity
FROM store_sales, date_dim, item
WHERE ss_sold_date_sk = d_date_sk AND ss_item_sk = i_item_sk
GROUP BY d_year, d_moy, i_category;

CREATE MATERIALIZED VIEW brand_revenue_2023 AS
SELECT i_brand, i_manufact_id, SUM(ss_ext_sales_price) AS revenue, SUM(ss_quantity) AS units
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE d_year = 2023
GROUP BY i_brand, i_manufact_id
HAVING SUM(ss_ext_sales_price) > 1000;

CREATE MATERIALIZED VIEW customer_store_lifetime AS
SELECT c_customer_sk, c_last_name, c_state, COUNT(DISTINCT ss_ticket_number) AS tickets,
  SUM(ss_ext_sales_price) AS spent, SUM(ss_net_profit) AS profit
FROM customer
JOIN store_sales ON ss_customer_sk = c_customer_sk
GROUP BY c_customer_sk, c_last_name, c_state;

CREATE MATERIALIZED VIEW web_category_margin AS
SELECT i_category, SUM(ws_ext_sales_price) AS revenue, SUM(ws_net_profit) AS profit,
  100 * SUM(ws_net_profit) / NULLIF(SUM(ws_ext_sales_price), 0) AS margin_pct
FROM web_sales
JOIN item ON ws_item_sk = i_item_sk
GROUP BY i_category;

CREATE MATERIALIZED VIEW return_reason_summary AS
SELECT sr_reason, COUNT(*) AS returns, SUM(sr_return_amt) AS amount,
  AVG(sr_return_quantity) AS avg_quantity
FROM store_returns
GROUP BY sr_reason;

CREATE MATERIALIZED VIEW price_band_by_category AS
SELECT i_category,
  CASE WHEN ss_sales_price < 25 THEN 'low' WHEN ss_sales_price < 100 THEN 'mid'
       ELSE 'high' END AS price_band,
  COUNT(*) AS lines, SUM(ss_quantity) AS units
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
GROUP BY i_category,
  CASE WHEN ss_sales_price < 25 THEN 'low' WHEN ss_sales_price < 100 THEN 'mid'
       ELSE 'high' END;

CREATE MATERIALIZED VIEW large_store_lines AS
SELECT ss_ticket_number, ss_item_sk, s_store_name, i_category, ss_quantity,
  ss_ext_sales_price, d_date
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
JOIN item ON ss_item_sk = i_item_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE ss_ext_sales_price > 8000;

CREATE MATERIALIZED VIEW distinct_category_states AS
SELECT DISTINCT i_category, s_state
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
JOIN store ON ss_store_sk = s_store_sk
WHERE ss_net_profit < 0;

-- ---------------------------------------------------------------------------------------
-- COUNT(DISTINCT), STDDEV / VARIANCE, MIN / MAX
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW distinct_customers_store_year AS
SELECT s_store_name, d_year, COUNT(DISTINCT ss_customer_sk) AS customers,
  COUNT(DISTINCT ss_item_sk) AS items, COUNT(*) AS lines
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
GROUP BY s_store_name, d_year;

CREATE MATERIALIZED VIEW catalog_reach_by_category AS
SELECT i_category, COUNT(DISTINCT cs_item_sk) AS items_sold,
  COUNT(DISTINCT cs_bill_customer_sk) AS buyers
FROM catalog_sales
JOIN item ON cs_item_sk = i_item_sk
GROUP BY i_category;

CREATE MATERIALIZED VIEW item_price_volatility AS
SELECT i_item_id, i_category, COUNT(*) AS lines, AVG(ss_sales_price) AS avg_price,
  STDDEV_SAMP(ss_sales_price) AS price_stddev
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
GROUP BY i_item_id, i_category
HAVING COUNT(*) >= 3;

CREATE MATERIALIZED VIEW quantity_variance_store_quarter AS
SELECT ss_store_sk, d_qoy, VARIANCE(ss_quantity) AS quantity_variance,
  STDDEV_POP(ss_quantity) AS quantity_stddev_pop, VAR_POP(ss_net_profit) AS profit_var_pop
FROM store_sales
JOIN date_dim ON ss_sold_date_sk = d_date_sk
GROUP BY ss_store_sk, d_qoy;

CREATE MATERIALIZED VIEW brand_price_range AS
SELECT i_brand, MIN(ss_sales_price) AS min_price, MAX(ss_sales_price) AS max_price,
  MAX(d_date) AS last_sale, MIN(d_date) AS first_sale
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
JOIN date_dim ON ss_sold_date_sk = d_date_sk
GROUP BY i_brand;

CREATE MATERIALIZED VIEW customer_purchase_span AS
SELECT ss_customer_sk, MIN(d_date) AS first_purchase, MAX(d_date) AS last_purchase,
  DATEDIFF(MAX(d_date), MIN(d_date)) AS span_days, COUNT(*) AS lines
FROM store_sales
JOIN date_dim ON ss_sold_date_sk = d_date_sk
WHERE ss_customer_sk IS NOT NULL
GROUP BY ss_customer_sk;

CREATE MATERIALIZED VIEW inventory_item_stats AS
SELECT inv_item_sk, AVG(inv_quantity_on_hand) AS avg_on_hand,
  STDDEV_SAMP(inv_quantity_on_hand) AS stddev_on_hand, MIN(inv_quantity_on_hand) AS min_on_hand,
  MAX(inv_quantity_on_hand) AS max_on_hand
FROM inventory
GROUP BY inv_item_sk;

CREATE MATERIALIZED VIEW inventory_warehouse_month AS
SELECT w_warehouse_name, d_year, d_moy, SUM(inv_quantity_on_hand) AS on_hand,
  COUNT(DISTINCT inv_item_sk) AS items_stocked
FROM inventory
JOIN warehouse ON inv_warehouse_sk = w_warehouse_sk
JOIN date_dim ON inv_date_sk = d_date_sk
GROUP BY w_warehouse_name, d_year, d_moy;

-- ---------------------------------------------------------------------------------------
-- EXISTS, IN, correlated subqueries
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW store_and_web_customers AS
SELECT c_customer_sk, c_last_name, c_state
FROM customer
WHERE EXISTS (SELECT 1 FROM store_sales WHERE ss_customer_sk = c_customer_sk)
  AND EXISTS (SELECT 1 FROM web_sales WHERE ws_bill_customer_sk = c_customer_sk);

CREATE MATERIALIZED VIEW store_only_customers AS
SELECT c_customer_sk, c_first_name, c_last_name
FROM customer
WHERE EXISTS (SELECT 1 FROM store_sales WHERE ss_customer_sk = c_customer_sk)
  AND NOT EXISTS (SELECT 1 FROM web_sales WHERE ws_bill_customer_sk = c_customer_sk)
  AND NOT EXISTS (SELECT 1 FROM catalog_sales WHERE cs_bill_customer_sk = c_customer_sk);

CREATE MATERIALIZED VIEW items_sold_never_returned AS
SELECT i_item_sk, i_item_id, i_category
FROM item
WHERE i_item_sk IN (SELECT ss_item_sk FROM store_sales)
  AND i_item_sk NOT IN (SELECT sr_item_sk FROM store_returns);

CREATE MATERIALIZED VIEW big_ticket_store_summary AS
SELECT ss_store_sk, COUNT(DISTINCT ss_ticket_number) AS big_tickets,
  SUM(ss_ext_sales_price) AS revenue
FROM store_sales
WHERE ss_ticket_number IN (SELECT ss_ticket_number FROM store_sales
                           GROUP BY ss_ticket_number
                           HAVING SUM(ss_ext_sales_price) > 10000)
GROUP BY ss_store_sk;

CREATE MATERIALIZED VIEW promoted_items_all_channels AS
SELECT i_item_sk, i_item_id, i_brand
FROM item
WHERE i_item_sk IN (SELECT ss_item_sk FROM store_sales WHERE ss_promo_sk IS NOT NULL)
  AND i_item_sk IN (SELECT cs_item_sk FROM catalog_sales WHERE cs_promo_sk IS NOT NULL)
  AND i_item_sk IN (SELECT ws_item_sk FROM web_sales WHERE ws_promo_sk IS NOT NULL);

CREATE MATERIALIZED VIEW overpriced_store_lines AS
SELECT s1.ss_item_sk, s1.ss_ticket_number, s1.ss_sales_price
FROM store_sales s1
WHERE s1.ss_sales_price > (SELECT 1.3 * AVG(s2.ss_sales_price) FROM store_sales s2
                           WHERE s2.ss_item_sk = s1.ss_item_sk);

CREATE MATERIALIZED VIEW catalog_items_missing_on_web_2023 AS
SELECT i_category, COUNT(*) AS items
FROM item
WHERE EXISTS (SELECT 1 FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
              WHERE cs_item_sk = i_item_sk AND d_year = 2023)
  AND NOT EXISTS (SELECT 1 FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
                  WHERE ws_item_sk = i_item_sk AND d_year = 2023)
GROUP BY i_category;

CREATE MATERIALIZED VIEW customers_above_store_average AS
SELECT ss_customer_sk, ss_store_sk, SUM(ss_ext_sales_price) AS spent
FROM store_sales s1
WHERE ss_customer_sk IS NOT NULL
GROUP BY ss_customer_sk, ss_store_sk
HAVING SUM(ss_ext_sales_price) > (SELECT 3 * AVG(s2.ss_ext_sales_price) FROM store_sales s2
                                  WHERE s2.ss_store_sk = s1.ss_store_sk);

-- ---------------------------------------------------------------------------------------
-- Outer joins
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW net_sales_by_category AS
SELECT i_category, SUM(ss_ext_sales_price) AS gross,
  SUM(COALESCE(sr_return_amt, 0)) AS returned,
  SUM(ss_ext_sales_price) - SUM(COALESCE(sr_return_amt, 0)) AS net
FROM store_sales
LEFT JOIN store_returns ON ss_item_sk = sr_item_sk AND ss_ticket_number = sr_ticket_number
JOIN item ON ss_item_sk = i_item_sk
GROUP BY i_category;

CREATE MATERIALIZED VIEW item_web_coverage AS
SELECT i_item_sk, i_category, COUNT(ws_order_number) AS web_lines,
  COALESCE(SUM(ws_ext_sales_price), 0) AS web_revenue
FROM item
LEFT JOIN web_sales ON ws_item_sk = i_item_sk
GROUP BY i_item_sk, i_category;

CREATE MATERIALIZED VIEW store_return_rate AS
SELECT s_store_name, COUNT(*) AS lines, COUNT(sr_ticket_number) AS returned_lines,
  SUM(COALESCE(sr_return_amt, 0)) AS returned_amount
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
LEFT OUTER JOIN store_returns
  ON sr_item_sk = ss_item_sk AND sr_ticket_number = ss_ticket_number
GROUP BY s_store_name;

CREATE MATERIALIZED VIEW unused_catalog_promotions AS
SELECT p_promo_sk, p_promo_name, p_cost
FROM promotion
LEFT JOIN catalog_sales ON cs_promo_sk = p_promo_sk
WHERE cs_order_number IS NULL;

CREATE MATERIALIZED VIEW orphan_returns AS
SELECT sr_item_sk, sr_ticket_number, sr_return_amt
FROM store_returns
LEFT JOIN store_sales ON ss_item_sk = sr_item_sk AND ss_ticket_number = sr_ticket_number
WHERE ss_item_sk IS NULL;

CREATE MATERIALIZED VIEW warehouse_stock_and_web_sales AS
SELECT w_warehouse_name, inv_item_sk, inv_quantity_on_hand, ws_order_number, ws_quantity
FROM inventory
JOIN date_dim ON inv_date_sk = d_date_sk
RIGHT JOIN warehouse ON inv_warehouse_sk = w_warehouse_sk
LEFT JOIN web_sales ON ws_warehouse_sk = inv_warehouse_sk AND ws_item_sk = inv_item_sk
  AND ws_sold_date_sk = inv_date_sk
WHERE d_year = 2023 OR d_year IS NULL;

-- ---------------------------------------------------------------------------------------
-- Nested derived tables
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW avg_ticket_by_store AS
SELECT ss_store_sk, COUNT(*) AS tickets, AVG(ticket_total) AS avg_ticket,
  MAX(ticket_total) AS max_ticket
FROM (SELECT ss_store_sk, ss_ticket_number, SUM(ss_ext_sales_price) AS ticket_total
      FROM store_sales GROUP BY ss_store_sk, ss_ticket_number) tickets
GROUP BY ss_store_sk;

CREATE MATERIALIZED VIEW basket_size_distribution AS
SELECT items_in_basket, COUNT(*) AS baskets
FROM (SELECT ss_ticket_number, COUNT(*) AS items_in_basket
      FROM store_sales GROUP BY ss_ticket_number) baskets
GROUP BY items_in_basket;

CREATE MATERIALIZED VIEW customer_spend_bands AS
SELECT c_state, spend_band, COUNT(*) AS customers, SUM(total) AS spent
FROM (SELECT c_state, total,
        CASE WHEN total >= 20000 THEN 'gold' WHEN total >= 5000 THEN 'silver'
             ELSE 'bronze' END AS spend_band
      FROM (SELECT ss_customer_sk, SUM(ss_ext_sales_price) AS total
            FROM store_sales WHERE ss_customer_sk IS NOT NULL
            GROUP BY ss_customer_sk) per_customer
      JOIN customer ON ss_customer_sk = c_customer_sk) banded
GROUP BY c_state, spend_band;

CREATE MATERIALIZED VIEW web_order_size_stats AS
SELECT COUNT(*) AS orders, AVG(lines) AS avg_lines, MAX(order_total) AS max_order,
  STDDEV_SAMP(order_total) AS order_stddev
FROM (SELECT ws_order_number, COUNT(*) AS lines, SUM(ws_ext_sales_price) AS order_total
      FROM web_sales GROUP BY ws_order_number) orders;

CREATE MATERIALIZED VIEW monthly_active_customers AS
SELECT d_year, d_moy, COUNT(*) AS active_customers
FROM (SELECT DISTINCT d_year, d_moy, ss_customer_sk
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      WHERE ss_customer_sk IS NOT NULL) active
GROUP BY d_year, d_moy;

CREATE MATERIALIZED VIEW category_share_of_year AS
SELECT c.d_year AS sales_year, c.i_category, c.revenue, y.revenue AS year_revenue,
  c.revenue / NULLIF(y.revenue, 0) AS share
FROM (SELECT d_year, i_category, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      JOIN item ON ss_item_sk = i_item_sk
      GROUP BY d_year, i_category) c
JOIN (SELECT d_year, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      GROUP BY d_year) y ON c.d_year = y.d_year;

CREATE MATERIALIZED VIEW items_above_category_price AS
SELECT i_item_sk, i_category, i_current_price, category_avg
FROM item
JOIN (SELECT i_category AS category, AVG(i_current_price) AS category_avg
      FROM item GROUP BY i_category) averages ON i_category = category
WHERE i_current_price > category_avg;

CREATE MATERIALIZED VIEW repeat_customers_by_store AS
SELECT ss_store_sk, COUNT(*) AS repeat_customers, AVG(visits) AS avg_visits
FROM (SELECT ss_store_sk, ss_customer_sk, COUNT(DISTINCT ss_ticket_number) AS visits
      FROM store_sales WHERE ss_customer_sk IS NOT NULL
      GROUP BY ss_store_sk, ss_customer_sk) per_customer
WHERE visits > 1
GROUP BY ss_store_sk;

CREATE MATERIALIZED VIEW catalog_stock_turnover AS
SELECT sold.w_warehouse_name, sold.i_category, sold.units,
  stock.avg_on_hand, sold.units / NULLIF(stock.avg_on_hand, 0) AS turnover
FROM (SELECT w_warehouse_name, i_category, SUM(cs_quantity) AS units
      FROM catalog_sales JOIN warehouse ON cs_warehouse_sk = w_warehouse_sk
      JOIN item ON cs_item_sk = i_item_sk
      GROUP BY w_warehouse_name, i_category) sold
JOIN (SELECT w_warehouse_name, i_category, AVG(inv_quantity_on_hand) AS avg_on_hand
      FROM inventory JOIN warehouse ON inv_warehouse_sk = w_warehouse_sk
      JOIN item ON inv_item_sk = i_item_sk
      GROUP BY w_warehouse_name, i_category) stock
  ON sold.w_warehouse_name = stock.w_warehouse_name AND sold.i_category = stock.i_category;

CREATE MATERIALIZED VIEW item_quantity_bands AS
SELECT band, COUNT(*) AS items, AVG(avg_qty) AS mean_avg_qty
FROM (SELECT item_sk, avg_qty,
        CASE WHEN avg_qty > 60 THEN 'high' WHEN avg_qty > 40 THEN 'medium' ELSE 'low' END AS band
      FROM (SELECT ss_item_sk AS item_sk, AVG(ss_quantity) AS avg_qty
            FROM (SELECT ss_item_sk, ss_quantity
                  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
                  WHERE d_year >= 2022) recent
            GROUP BY ss_item_sk) per_item) banded
GROUP BY band;

CREATE MATERIALIZED VIEW peak_day_per_month AS
SELECT d_year, d_moy, MAX(daily) AS peak_day_revenue, AVG(daily) AS avg_day_revenue,
  COUNT(*) AS selling_days
FROM (SELECT d_date, d_year, d_moy, SUM(ss_ext_sales_price) AS daily
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      GROUP BY d_date, d_year, d_moy) days
GROUP BY d_year, d_moy;

CREATE MATERIALIZED VIEW top_ten_items_2023 AS
SELECT top.ss_item_sk, i_item_id, i_category, top.revenue
FROM (SELECT ss_item_sk, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      WHERE d_year = 2023
      GROUP BY ss_item_sk
      ORDER BY revenue DESC, ss_item_sk
      LIMIT 10) top
JOIN item ON top.ss_item_sk = i_item_sk;

-- ---------------------------------------------------------------------------------------
-- Window functions
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW item_rank_in_category AS
SELECT i_category, i_item_id, revenue,
  RANK() OVER (PARTITION BY i_category ORDER BY revenue DESC) AS category_rank
FROM (SELECT i_category, i_item_id, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN item ON ss_item_sk = i_item_sk
      GROUP BY i_category, i_item_id) per_item;

CREATE MATERIALIZED VIEW top_stores_per_state_year AS
SELECT s_state, d_year, s_store_name, revenue, rn AS position
FROM (SELECT s_state, d_year, s_store_name, revenue,
        ROW_NUMBER() OVER (PARTITION BY s_state, d_year
                           ORDER BY revenue DESC, s_store_name) AS rn
      FROM (SELECT s_state, d_year, s_store_name, SUM(ss_ext_sales_price) AS revenue
            FROM store_sales JOIN store ON ss_store_sk = s_store_sk
            JOIN date_dim ON ss_sold_date_sk = d_date_sk
            GROUP BY s_state, d_year, s_store_name) per_store) ranked
WHERE rn <= 2;

CREATE MATERIALIZED VIEW running_monthly_revenue AS
SELECT d_year, d_moy, revenue,
  SUM(revenue) OVER (PARTITION BY d_year ORDER BY d_moy) AS year_to_date
FROM (SELECT d_year, d_moy, SUM(cs_ext_sales_price) AS revenue
      FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
      GROUP BY d_year, d_moy) monthly;

CREATE MATERIALIZED VIEW category_moving_average AS
SELECT i_category, d_year, d_moy, revenue,
  AVG(revenue) OVER (PARTITION BY i_category ORDER BY d_year, d_moy
                     ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS moving_avg_3m
FROM (SELECT i_category, d_year, d_moy, SUM(ws_ext_sales_price) AS revenue
      FROM web_sales JOIN item ON ws_item_sk = i_item_sk
      JOIN date_dim ON ws_sold_date_sk = d_date_sk
      GROUP BY i_category, d_year, d_moy) monthly;

CREATE MATERIALIZED VIEW store_share_of_state AS
SELECT s_state, s_store_name, revenue,
  revenue / SUM(revenue) OVER (PARTITION BY s_state) AS state_share,
  COUNT(*) OVER (PARTITION BY s_state) AS stores_in_state
FROM (SELECT s_state, s_store_name, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN store ON ss_store_sk = s_store_sk
      GROUP BY s_state, s_store_name) per_store;

CREATE MATERIALIZED VIEW store_month_over_month AS
SELECT ss_store_sk, d_year, d_moy, revenue,
  LAG(revenue) OVER (PARTITION BY ss_store_sk ORDER BY d_year, d_moy) AS prev_month_revenue,
  revenue - LAG(revenue) OVER (PARTITION BY ss_store_sk ORDER BY d_year, d_moy) AS change
FROM (SELECT ss_store_sk, d_year, d_moy, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      GROUP BY ss_store_sk, d_year, d_moy) monthly;

CREATE MATERIALIZED VIEW item_revenue_quartiles AS
SELECT ss_item_sk, revenue, NTILE(4) OVER (ORDER BY revenue, ss_item_sk) AS quartile
FROM (SELECT ss_item_sk, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales GROUP BY ss_item_sk) per_item;

CREATE MATERIALIZED VIEW customer_global_rank AS
SELECT cs_bill_customer_sk, total, RANK() OVER (ORDER BY total DESC) AS overall_rank
FROM (SELECT cs_bill_customer_sk, SUM(cs_net_profit) AS total
      FROM catalog_sales WHERE cs_bill_customer_sk IS NOT NULL
      GROUP BY cs_bill_customer_sk) per_customer;

CREATE MATERIALIZED VIEW brand_percent_rank AS
SELECT i_category, i_brand, revenue,
  PERCENT_RANK() OVER (PARTITION BY i_category ORDER BY revenue) AS pct_rank
FROM (SELECT i_category, i_brand, SUM(ss_ext_sales_price) AS revenue
      FROM store_sales JOIN item ON ss_item_sk = i_item_sk
      GROUP BY i_category, i_brand) per_brand;

CREATE MATERIALIZED VIEW inventory_vs_warehouse_average AS
SELECT inv_warehouse_sk, inv_date_sk, on_hand,
  AVG(on_hand) OVER (PARTITION BY inv_warehouse_sk) AS warehouse_avg,
  on_hand - AVG(on_hand) OVER (PARTITION BY inv_warehouse_sk) AS deviation
FROM (SELECT inv_warehouse_sk, inv_date_sk, SUM(inv_quantity_on_hand) AS on_hand
      FROM inventory GROUP BY inv_warehouse_sk, inv_date_sk) snapshots;

CREATE MATERIALIZED VIEW item_price_position AS
SELECT i_item_sk, i_class, i_current_price,
  CUME_DIST() OVER (PARTITION BY i_class ORDER BY i_current_price) AS price_cume_dist,
  MAX(i_current_price) OVER (PARTITION BY i_category) AS category_max_price
FROM item;

CREATE MATERIALIZED VIEW days_between_visits AS
SELECT ss_customer_sk, ss_ticket_number, d_date,
  DATEDIFF(d_date, LAG(d_date) OVER (PARTITION BY ss_customer_sk
                                     ORDER BY d_date, ss_ticket_number)) AS days_since_last
FROM (SELECT DISTINCT ss_customer_sk, ss_ticket_number, d_date
      FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
      WHERE ss_customer_sk IS NOT NULL) visits;

CREATE MATERIALIZED VIEW best_month_per_year AS
SELECT d_year, d_moy AS best_month, revenue
FROM (SELECT d_year, d_moy, revenue,
        ROW_NUMBER() OVER (PARTITION BY d_year ORDER BY revenue DESC, d_moy) AS rn
      FROM (SELECT d_year, d_moy, SUM(ws_ext_sales_price) AS revenue
            FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
            GROUP BY d_year, d_moy) monthly) ranked
WHERE rn = 1;

CREATE MATERIALIZED VIEW large_lines_with_store_counts AS
SELECT ss_store_sk, ss_ticket_number, ss_item_sk, ss_ext_sales_price,
  COUNT(*) OVER (PARTITION BY ss_store_sk) AS large_lines_in_store,
  SUM(ss_ext_sales_price) OVER (PARTITION BY ss_store_sk) AS large_revenue_in_store
FROM store_sales
WHERE ss_ext_sales_price > 6000;

CREATE MATERIALIZED VIEW catalog_category_revenue_rank_all AS
SELECT i_category, revenue, DENSE_RANK() OVER (ORDER BY revenue DESC) AS revenue_rank,
  revenue / SUM(revenue) OVER () AS share_of_total
FROM (SELECT i_category, SUM(cs_ext_sales_price) AS revenue
      FROM catalog_sales JOIN item ON cs_item_sk = i_item_sk
      GROUP BY i_category) per_category;

-- ---------------------------------------------------------------------------------------
-- Set operations
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW all_channel_lines AS
SELECT 'store' AS channel, ss_item_sk AS item_sk, ss_sold_date_sk AS date_sk,
  ss_ext_sales_price AS amount
FROM store_sales
UNION ALL
SELECT 'catalog' AS channel, cs_item_sk, cs_sold_date_sk, cs_ext_sales_price
FROM catalog_sales
UNION ALL
SELECT 'web' AS channel, ws_item_sk, ws_sold_date_sk, ws_ext_sales_price
FROM web_sales;

CREATE MATERIALIZED VIEW channel_year_totals AS
SELECT 'store' AS channel, d_year, SUM(ss_ext_sales_price) AS revenue, COUNT(*) AS lines
FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
GROUP BY d_year
UNION ALL
SELECT 'catalog' AS channel, d_year, SUM(cs_ext_sales_price), COUNT(*)
FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
GROUP BY d_year
UNION ALL
SELECT 'web' AS channel, d_year, SUM(ws_ext_sales_price), COUNT(*)
FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
GROUP BY d_year;

CREATE MATERIALIZED VIEW customers_any_channel AS
SELECT ss_customer_sk AS customer_sk FROM store_sales WHERE ss_customer_sk IS NOT NULL
UNION
SELECT cs_bill_customer_sk FROM catalog_sales WHERE cs_bill_customer_sk IS NOT NULL
UNION
SELECT ws_bill_customer_sk FROM web_sales WHERE ws_bill_customer_sk IS NOT NULL;

CREATE MATERIALIZED VIEW customers_all_channels AS
SELECT ss_customer_sk AS customer_sk FROM store_sales
INTERSECT
SELECT cs_bill_customer_sk FROM catalog_sales
INTERSECT
SELECT ws_bill_customer_sk FROM web_sales;

CREATE MATERIALIZED VIEW store_not_web_customers AS
SELECT ss_customer_sk AS customer_sk FROM store_sales WHERE ss_customer_sk IS NOT NULL
EXCEPT
SELECT ws_bill_customer_sk FROM web_sales;

CREATE MATERIALIZED VIEW channel_category_revenue AS
SELECT channel, i_category, SUM(amount) AS revenue, COUNT(*) AS lines
FROM (SELECT 'store' AS channel, ss_item_sk AS item_sk, ss_ext_sales_price AS amount
      FROM store_sales
      UNION ALL
      SELECT 'catalog', cs_item_sk, cs_ext_sales_price FROM catalog_sales
      UNION ALL
      SELECT 'web', ws_item_sk, ws_ext_sales_price FROM web_sales) lines
JOIN item ON item_sk = i_item_sk
GROUP BY channel, i_category;

CREATE MATERIALIZED VIEW item_month_both_remote_channels AS
SELECT cs_item_sk AS item_sk, d_year, d_moy
FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
INTERSECT ALL
SELECT ws_item_sk, d_year, d_moy
FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk;

CREATE MATERIALIZED VIEW kept_lines_per_item AS
SELECT item_sk, COUNT(*) AS kept_lines
FROM (SELECT ss_item_sk AS item_sk, ss_ticket_number AS ticket FROM store_sales
      EXCEPT ALL
      SELECT sr_item_sk, sr_ticket_number FROM store_returns) kept
GROUP BY item_sk;

CREATE MATERIALIZED VIEW items_on_web_and_catalog AS
SELECT i_item_id, i_category, i_brand
FROM item
WHERE i_item_sk IN (SELECT ws_item_sk FROM web_sales
                    INTERSECT
                    SELECT cs_item_sk FROM catalog_sales);

CREATE MATERIALIZED VIEW active_customers_per_state AS
SELECT c_state, COUNT(*) AS active_customers
FROM customer
JOIN (SELECT ss_customer_sk AS customer_sk FROM store_sales
      UNION
      SELECT ws_bill_customer_sk FROM web_sales) active ON customer_sk = c_customer_sk
GROUP BY c_state;

-- ---------------------------------------------------------------------------------------
-- ROLLUP, CUBE, GROUPING SETS
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW rollup_year_quarter_month AS
SELECT d_year, d_qoy, d_moy, SUM(ss_ext_sales_price) AS revenue,
  GROUPING(d_qoy) AS g_quarter, GROUPING(d_moy) AS g_month
FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
GROUP BY ROLLUP (d_year, d_qoy, d_moy);

CREATE MATERIALIZED VIEW rollup_category_class AS
SELECT CASE WHEN GROUPING(i_category) = 1 THEN 'ALL' ELSE i_category END AS category,
  CASE WHEN GROUPING(i_class) = 1 THEN 'ALL' ELSE i_class END AS class,
  SUM(cs_ext_sales_price) AS revenue, SUM(cs_net_profit) AS profit
FROM catalog_sales JOIN item ON cs_item_sk = i_item_sk
GROUP BY ROLLUP (i_category, i_class);

CREATE MATERIALIZED VIEW cube_state_email_promo AS
SELECT s_state, p_channel_email, SUM(ss_ext_sales_price) AS revenue, COUNT(*) AS lines,
  GROUPING(s_state) AS g_state, GROUPING(p_channel_email) AS g_email
FROM store_sales
JOIN store ON ss_store_sk = s_store_sk
JOIN promotion ON ss_promo_sk = p_promo_sk
GROUP BY CUBE (s_state, p_channel_email);

CREATE MATERIALIZED VIEW grouping_sets_category_year AS
SELECT i_category, d_year, SUM(ws_ext_sales_price) AS revenue,
  GROUPING_ID(i_category, d_year) AS grouping_level
FROM web_sales
JOIN item ON ws_item_sk = i_item_sk
JOIN date_dim ON ws_sold_date_sk = d_date_sk
GROUP BY GROUPING SETS ((i_category, d_year), (i_category), ());

CREATE MATERIALIZED VIEW rollup_state_city_having AS
SELECT s_state, s_city, SUM(ss_net_profit) AS profit, COUNT(DISTINCT ss_ticket_number) AS tickets
FROM store_sales JOIN store ON ss_store_sk = s_store_sk
GROUP BY ROLLUP (s_state, s_city)
HAVING SUM(ss_net_profit) <> 0;

CREATE MATERIALIZED VIEW cube_warehouse_state_category AS
SELECT w_state, i_category, AVG(inv_quantity_on_hand) AS avg_on_hand,
  MIN(inv_quantity_on_hand) AS min_on_hand
FROM inventory
JOIN warehouse ON inv_warehouse_sk = w_warehouse_sk
JOIN item ON inv_item_sk = i_item_sk
GROUP BY CUBE (w_state, i_category);

CREATE MATERIALIZED VIEW grouping_sets_returns AS
SELECT sr_reason, sr_store_sk, SUM(sr_return_amt) AS amount, COUNT(*) AS returns,
  GROUPING(sr_reason) AS g_reason, GROUPING(sr_store_sk) AS g_store
FROM store_returns
GROUP BY GROUPING SETS ((sr_reason), (sr_store_sk), ());

CREATE MATERIALIZED VIEW rollup_margin_rank AS
SELECT gross_margin, i_category, i_class, lochierarchy,
  RANK() OVER (PARTITION BY lochierarchy,
                 CASE WHEN g_class = 0 THEN i_category END
               ORDER BY gross_margin) AS rank_within_parent
FROM (SELECT SUM(ss_net_profit) / NULLIF(SUM(ss_ext_sales_price), 0) AS gross_margin,
        i_category, i_class, GROUPING(i_category) + GROUPING(i_class) AS lochierarchy,
        GROUPING(i_class) AS g_class
      FROM store_sales JOIN item ON ss_item_sk = i_item_sk
      JOIN store ON ss_store_sk = s_store_sk
      WHERE s_state IN ('CA', 'TX', 'NY', 'WA')
      GROUP BY ROLLUP (i_category, i_class)) margins;

CREATE MATERIALIZED VIEW cube_channel_flags_stddev AS
SELECT p_channel_email, p_channel_tv, STDDEV_SAMP(cs_sales_price) AS price_stddev,
  COUNT(*) AS lines
FROM catalog_sales JOIN promotion ON cs_promo_sk = p_promo_sk
GROUP BY CUBE (p_channel_email, p_channel_tv);

-- ---------------------------------------------------------------------------------------
-- WITH: CTEs used once, used several times, year over year by self-join, CTE over CTE
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW cte_yoy_category AS
WITH yearly AS (
  SELECT i_category, d_year, SUM(ss_ext_sales_price) AS revenue
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk
  JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY i_category, d_year)
SELECT cur.i_category AS category, cur.d_year AS sales_year, cur.revenue,
  prev.revenue AS prev_revenue, cur.revenue - prev.revenue AS growth
FROM yearly cur
JOIN yearly prev ON cur.i_category = prev.i_category AND cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW cte_yoy_store_growth AS
WITH store_year AS (
  SELECT s_store_sk, s_store_name, d_year, SUM(ss_net_profit) AS profit
  FROM store_sales JOIN store ON ss_store_sk = s_store_sk
  JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY s_store_sk, s_store_name, d_year)
SELECT cur.s_store_name AS store_name, cur.d_year AS profit_year, cur.profit,
  prev.profit AS prev_profit,
  ROUND(100 * (cur.profit - prev.profit) / NULLIF(ABS(prev.profit), 0), 2) AS growth_pct
FROM store_year cur
LEFT JOIN store_year prev ON cur.s_store_sk = prev.s_store_sk AND prev.d_year = cur.d_year - 1;

CREATE MATERIALIZED VIEW cte_customer_web_vs_store_growth AS
WITH year_total AS (
  SELECT c_customer_id AS customer_id, c_last_name AS last_name, d_year AS dyear,
    SUM(ss_ext_sales_price) AS year_total, 's' AS sale_type
  FROM customer JOIN store_sales ON c_customer_sk = ss_customer_sk
  JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY c_customer_id, c_last_name, d_year
  UNION ALL
  SELECT c_customer_id, c_last_name, d_year, SUM(ws_ext_sales_price), 'w'
  FROM customer JOIN web_sales ON c_customer_sk = ws_bill_customer_sk
  JOIN date_dim ON ws_sold_date_sk = d_date_sk
  GROUP BY c_customer_id, c_last_name, d_year)
SELECT t_s_secyear.customer_id, t_s_secyear.last_name
FROM year_total t_s_firstyear, year_total t_s_secyear, year_total t_w_firstyear,
  year_total t_w_secyear
WHERE t_s_secyear.customer_id = t_s_firstyear.customer_id
  AND t_s_firstyear.customer_id = t_w_secyear.customer_id
  AND t_s_firstyear.customer_id = t_w_firstyear.customer_id
  AND t_s_firstyear.sale_type = 's' AND t_w_firstyear.sale_type = 'w'
  AND t_s_secyear.sale_type = 's' AND t_w_secyear.sale_type = 'w'
  AND t_s_firstyear.dyear = 2022 AND t_s_secyear.dyear = 2023
  AND t_w_firstyear.dyear = 2022 AND t_w_secyear.dyear = 2023
  AND t_s_firstyear.year_total > 0 AND t_w_firstyear.year_total > 0
  AND t_w_secyear.year_total / t_w_firstyear.year_total
      > t_s_secyear.year_total / t_s_firstyear.year_total;

CREATE MATERIALIZED VIEW cte_recent_store_revenue AS
WITH recent AS (
  SELECT * FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  WHERE d_year = 2023)
SELECT ss_store_sk, d_qoy, SUM(ss_ext_sales_price) AS revenue, COUNT(*) AS lines
FROM recent
GROUP BY ss_store_sk, d_qoy;

CREATE MATERIALIZED VIEW cte_high_value_customers AS
WITH totals AS (
  SELECT c_customer_id, c_state, SUM(ss_ext_sales_price) AS total
  FROM store_sales JOIN customer ON ss_customer_sk = c_customer_sk
  GROUP BY c_customer_id, c_state),
average AS (SELECT AVG(total) AS avg_spend FROM totals)
SELECT c_customer_id, c_state, total, avg_spend
FROM totals CROSS JOIN average
WHERE total > 2 * avg_spend;

CREATE MATERIALIZED VIEW cte_excessive_returners AS
WITH customer_total_return AS (
  SELECT sr_customer_sk AS ctr_customer_sk, sr_store_sk AS ctr_store_sk,
    SUM(sr_return_amt) AS ctr_total_return
  FROM store_returns JOIN date_dim ON sr_returned_date_sk = d_date_sk
  WHERE d_year >= 2022
  GROUP BY sr_customer_sk, sr_store_sk)
SELECT c_customer_id, ctr1.ctr_store_sk AS store_sk, ctr1.ctr_total_return AS total_return
FROM customer_total_return ctr1
JOIN store ON s_store_sk = ctr1.ctr_store_sk
JOIN customer ON ctr1.ctr_customer_sk = c_customer_sk
WHERE ctr1.ctr_total_return > (SELECT AVG(ctr_total_return) * 1.2
                               FROM customer_total_return ctr2
                               WHERE ctr1.ctr_store_sk = ctr2.ctr_store_sk)
  AND s_state IN ('CA', 'TX', 'NY', 'WA', 'GA');

CREATE MATERIALIZED VIEW cte_channel_profit_rollup AS
WITH ss AS (
  SELECT ss_store_sk AS id, SUM(ss_ext_sales_price) AS sales, SUM(ss_net_profit) AS profit
  FROM store_sales GROUP BY ss_store_sk),
cs AS (
  SELECT cs_warehouse_sk AS id, SUM(cs_ext_sales_price) AS sales, SUM(cs_net_profit) AS profit
  FROM catalog_sales GROUP BY cs_warehouse_sk),
ws AS (
  SELECT ws_warehouse_sk AS id, SUM(ws_ext_sales_price) AS sales, SUM(ws_net_profit) AS profit
  FROM web_sales GROUP BY ws_warehouse_sk)
SELECT channel, id, SUM(sales) AS sales, SUM(profit) AS profit
FROM (SELECT 'store channel' AS channel, id, sales, profit FROM ss
      UNION ALL
      SELECT 'catalog channel' AS channel, id, sales, profit FROM cs
      UNION ALL
      SELECT 'web channel' AS channel, id, sales, profit FROM ws) x
GROUP BY ROLLUP (channel, id);

CREATE MATERIALIZED VIEW cte_weekly_day_ratios AS
WITH wscs AS (
  SELECT ws_sold_date_sk AS sold_date_sk, ws_ext_sales_price AS sales_price FROM web_sales
  UNION ALL
  SELECT cs_sold_date_sk, cs_ext_sales_price FROM catalog_sales),
wswscs AS (
  SELECT d_week_seq,
    SUM(CASE WHEN d_dow = 0 THEN sales_price END) AS sun_sales,
    SUM(CASE WHEN d_dow = 3 THEN sales_price END) AS wed_sales,
    SUM(CASE WHEN d_dow = 6 THEN sales_price END) AS sat_sales
  FROM wscs JOIN date_dim ON d_date_sk = sold_date_sk
  GROUP BY d_week_seq),
weeks AS (SELECT DISTINCT d_week_seq, d_year FROM date_dim)
SELECT y.d_week_seq AS week_2022, ROUND(y.sun_sales / NULLIF(z.sun_sales, 0), 2) AS sun_ratio,
  ROUND(y.wed_sales / NULLIF(z.wed_sales, 0), 2) AS wed_ratio,
  ROUND(y.sat_sales / NULLIF(z.sat_sales, 0), 2) AS sat_ratio
FROM (SELECT wswscs.* FROM wswscs JOIN weeks ON wswscs.d_week_seq = weeks.d_week_seq
      WHERE d_year = 2022) y
JOIN (SELECT wswscs.* FROM wswscs JOIN weeks ON wswscs.d_week_seq = weeks.d_week_seq
      WHERE d_year = 2023) z ON y.d_week_seq = z.d_week_seq - 52;

CREATE MATERIALIZED VIEW cte_inventory_variation AS
WITH inv AS (
  SELECT w_warehouse_sk, i_item_sk, d_qoy, stdev, mean,
    CASE mean WHEN 0 THEN NULL ELSE stdev / mean END AS cov
  FROM (SELECT w_warehouse_sk, i_item_sk, d_qoy,
          STDDEV_SAMP(inv_quantity_on_hand) AS stdev, AVG(inv_quantity_on_hand) AS mean
        FROM inventory JOIN item ON inv_item_sk = i_item_sk
        JOIN warehouse ON inv_warehouse_sk = w_warehouse_sk
        JOIN date_dim ON inv_date_sk = d_date_sk
        GROUP BY w_warehouse_sk, i_item_sk, d_qoy) foo
  WHERE CASE mean WHEN 0 THEN 0 ELSE stdev / mean END > 0.5)
SELECT inv1.w_warehouse_sk AS warehouse_sk, inv1.i_item_sk AS item_sk,
  inv1.mean AS mean_q1, inv1.cov AS cov_q1, inv2.mean AS mean_q2, inv2.cov AS cov_q2
FROM inv inv1
JOIN inv inv2 ON inv1.i_item_sk = inv2.i_item_sk AND inv1.w_warehouse_sk = inv2.w_warehouse_sk
WHERE inv1.d_qoy = 1 AND inv2.d_qoy = 2;

CREATE MATERIALIZED VIEW cte_best_month_per_item AS
WITH monthly AS (
  SELECT ss_item_sk, d_moy, SUM(ss_quantity) AS units
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY ss_item_sk, d_moy),
ranked AS (
  SELECT ss_item_sk, d_moy, units,
    RANK() OVER (PARTITION BY ss_item_sk ORDER BY units DESC) AS rk
  FROM monthly)
SELECT ss_item_sk, d_moy AS best_moy, units
FROM ranked
WHERE rk = 1;

CREATE MATERIALIZED VIEW cte_category_share AS
WITH cat AS (
  SELECT i_category, SUM(cs_ext_sales_price) AS revenue
  FROM catalog_sales JOIN item ON cs_item_sk = i_item_sk
  GROUP BY i_category)
SELECT i_category, revenue, revenue / (SELECT SUM(revenue) FROM cat) AS share
FROM cat;

CREATE MATERIALIZED VIEW cte_store_vs_state_average AS
WITH store_revenue AS (
  SELECT s_state, s_store_name, SUM(ss_ext_sales_price) AS revenue
  FROM store_sales JOIN store ON ss_store_sk = s_store_sk
  GROUP BY s_state, s_store_name),
state_average AS (
  SELECT s_state AS state, AVG(revenue) AS avg_revenue FROM store_revenue GROUP BY s_state)
SELECT s_state, s_store_name, revenue, avg_revenue, revenue - avg_revenue AS above_average
FROM store_revenue JOIN state_average ON s_state = state;

CREATE MATERIALIZED VIEW cte_channel_overlap_counts AS
WITH s AS (SELECT DISTINCT ss_customer_sk AS cust FROM store_sales
           WHERE ss_customer_sk IS NOT NULL),
w AS (SELECT DISTINCT ws_bill_customer_sk AS cust FROM web_sales
      WHERE ws_bill_customer_sk IS NOT NULL),
c AS (SELECT DISTINCT cs_bill_customer_sk AS cust FROM catalog_sales
      WHERE cs_bill_customer_sk IS NOT NULL)
SELECT CASE WHEN s.cust IS NULL THEN 0 ELSE 1 END AS in_store,
  CASE WHEN w.cust IS NULL THEN 0 ELSE 1 END AS on_web,
  CASE WHEN c.cust IS NULL THEN 0 ELSE 1 END AS in_catalog,
  COUNT(*) AS customers
FROM s
FULL OUTER JOIN w ON s.cust = w.cust
FULL OUTER JOIN c ON COALESCE(s.cust, w.cust) = c.cust
GROUP BY CASE WHEN s.cust IS NULL THEN 0 ELSE 1 END,
  CASE WHEN w.cust IS NULL THEN 0 ELSE 1 END,
  CASE WHEN c.cust IS NULL THEN 0 ELSE 1 END;

CREATE MATERIALIZED VIEW cte_store_catalog_customer_items AS
WITH ssci AS (
  SELECT ss_customer_sk AS customer_sk, ss_item_sk AS item_sk
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  WHERE d_year = 2023
  GROUP BY ss_customer_sk, ss_item_sk),
csci AS (
  SELECT cs_bill_customer_sk AS customer_sk, cs_item_sk AS item_sk
  FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
  WHERE d_year = 2023
  GROUP BY cs_bill_customer_sk, cs_item_sk)
SELECT
  SUM(CASE WHEN ssci.customer_sk IS NOT NULL AND csci.customer_sk IS NULL THEN 1 ELSE 0 END)
    AS store_only,
  SUM(CASE WHEN ssci.customer_sk IS NULL AND csci.customer_sk IS NOT NULL THEN 1 ELSE 0 END)
    AS catalog_only,
  SUM(CASE WHEN ssci.customer_sk IS NOT NULL AND csci.customer_sk IS NOT NULL THEN 1 ELSE 0 END)
    AS store_and_catalog
FROM ssci
FULL OUTER JOIN csci ON ssci.customer_sk = csci.customer_sk AND ssci.item_sk = csci.item_sk;

CREATE MATERIALIZED VIEW cte_frequent_items_best_customers AS
WITH frequent_ss_items AS (
  SELECT ss_item_sk AS item_sk, d_year, d_moy, COUNT(*) AS cnt
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY ss_item_sk, d_year, d_moy
  HAVING COUNT(*) > 2),
customer_totals AS (
  SELECT ss_customer_sk AS customer_sk, SUM(ss_quantity * ss_sales_price) AS csales
  FROM store_sales WHERE ss_customer_sk IS NOT NULL
  GROUP BY ss_customer_sk),
max_store_sales AS (SELECT MAX(csales) AS tpcds_cmax FROM customer_totals),
best_ss_customer AS (
  SELECT customer_sk FROM customer_totals
  WHERE csales > 0.3 * (SELECT tpcds_cmax FROM max_store_sales))
SELECT d_year, SUM(cs_quantity * cs_sales_price) AS sales, COUNT(*) AS lines
FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
WHERE cs_item_sk IN (SELECT item_sk FROM frequent_ss_items)
  AND cs_bill_customer_sk IN (SELECT customer_sk FROM best_ss_customer)
GROUP BY d_year;

CREATE MATERIALIZED VIEW cte_state_excessive_returns AS
WITH customer_total_return AS (
  SELECT sr_customer_sk AS ctr_customer_sk, c_state AS ctr_state,
    SUM(sr_return_amt) AS ctr_total_return
  FROM store_returns JOIN customer ON sr_customer_sk = c_customer_sk
  GROUP BY sr_customer_sk, c_state)
SELECT ctr_customer_sk, ctr_state, ctr_total_return
FROM customer_total_return ctr1
WHERE ctr_total_return > (SELECT AVG(ctr_total_return) * 1.5 FROM customer_total_return ctr2
                          WHERE ctr1.ctr_state = ctr2.ctr_state);

CREATE MATERIALIZED VIEW cte_monthly_brand_deviation AS
WITH v1 AS (
  SELECT i_category, i_brand, s_store_name, d_year, d_moy,
    SUM(ss_sales_price) AS sum_sales,
    AVG(SUM(ss_sales_price)) OVER (PARTITION BY i_category, i_brand, s_store_name, d_year)
      AS avg_monthly_sales,
    RANK() OVER (PARTITION BY i_category, i_brand, s_store_name ORDER BY d_year, d_moy) AS rn
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk
  JOIN date_dim ON ss_sold_date_sk = d_date_sk
  JOIN store ON ss_store_sk = s_store_sk
  WHERE d_year = 2023
  GROUP BY i_category, i_brand, s_store_name, d_year, d_moy),
v2 AS (
  SELECT v1.i_category, v1.i_brand, v1.s_store_name, v1.d_year, v1.d_moy,
    v1.avg_monthly_sales, v1.sum_sales, v1_lag.sum_sales AS psum, v1_lead.sum_sales AS nsum
  FROM v1
  JOIN v1 v1_lag ON v1.i_category = v1_lag.i_category AND v1.i_brand = v1_lag.i_brand
    AND v1.s_store_name = v1_lag.s_store_name AND v1.rn = v1_lag.rn + 1
  JOIN v1 v1_lead ON v1.i_category = v1_lead.i_category AND v1.i_brand = v1_lead.i_brand
    AND v1.s_store_name = v1_lead.s_store_name AND v1.rn = v1_lead.rn - 1)
SELECT * FROM v2
WHERE avg_monthly_sales > 0
  AND ABS(sum_sales - avg_monthly_sales) / avg_monthly_sales > 0.1;

CREATE MATERIALIZED VIEW cte_monthly_yoy AS
WITH m AS (
  SELECT d_year, d_moy, SUM(ws_ext_sales_price) AS revenue
  FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
  GROUP BY d_year, d_moy)
SELECT cur.d_year AS sales_year, cur.d_moy AS sales_month, cur.revenue,
  prev.revenue AS revenue_last_year,
  ROUND(100 * (cur.revenue - prev.revenue) / NULLIF(prev.revenue, 0), 2) AS yoy_pct
FROM m cur
LEFT JOIN m prev ON cur.d_moy = prev.d_moy AND cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW cte_channel_yoy AS
WITH y AS (
  SELECT 'store' AS channel, d_year, SUM(ss_ext_sales_price) AS revenue
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk GROUP BY d_year
  UNION ALL
  SELECT 'catalog' AS channel, d_year, SUM(cs_ext_sales_price)
  FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk GROUP BY d_year
  UNION ALL
  SELECT 'web' AS channel, d_year, SUM(ws_ext_sales_price)
  FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk GROUP BY d_year)
SELECT cur.channel, cur.d_year AS syear, cur.revenue, prev.revenue AS prev_revenue,
  cur.revenue / NULLIF(prev.revenue, 0) AS growth_ratio
FROM y cur
JOIN y prev ON cur.channel = prev.channel AND cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW cte_warehouse_inventory_yoy AS
WITH w AS (
  SELECT inv_warehouse_sk AS w_warehouse_sk, d_year, AVG(inv_quantity_on_hand) AS avg_on_hand
  FROM inventory JOIN date_dim ON inv_date_sk = d_date_sk
  GROUP BY inv_warehouse_sk, d_year)
SELECT a.w_warehouse_sk, a.d_year AS stock_year, a.avg_on_hand,
  b.avg_on_hand AS prev_avg_on_hand, a.avg_on_hand - b.avg_on_hand AS change_on_hand
FROM w a
JOIN w b ON a.w_warehouse_sk = b.w_warehouse_sk AND a.d_year = b.d_year + 1;

CREATE MATERIALIZED VIEW cte_new_customers_per_month AS
WITH first_purchase AS (
  SELECT ss_customer_sk, MIN(ss_sold_date_sk) AS first_date_sk
  FROM store_sales WHERE ss_customer_sk IS NOT NULL
  GROUP BY ss_customer_sk)
SELECT d_year, d_moy, COUNT(*) AS new_customers
FROM first_purchase JOIN date_dim ON first_date_sk = d_date_sk
GROUP BY d_year, d_moy;

CREATE MATERIALIZED VIEW cte_churned_customers_by_state AS
WITH last_year AS (
  SELECT DISTINCT ss_customer_sk AS cust
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2022),
this_year AS (
  SELECT DISTINCT ss_customer_sk AS cust
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2023)
SELECT c_state, COUNT(*) AS churned
FROM last_year l
LEFT JOIN this_year t ON l.cust = t.cust
JOIN customer ON l.cust = c_customer_sk
WHERE t.cust IS NULL
GROUP BY c_state;

CREATE MATERIALIZED VIEW cte_store_only_items_by_category AS
WITH store_items AS (
  SELECT ss_item_sk AS item_sk
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2023),
web_items AS (
  SELECT ws_item_sk AS item_sk
  FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk WHERE d_year = 2023),
only_store AS (
  SELECT item_sk FROM store_items EXCEPT SELECT item_sk FROM web_items)
SELECT i_category, COUNT(*) AS items
FROM only_store JOIN item ON item_sk = i_item_sk
GROUP BY i_category;

CREATE MATERIALIZED VIEW cte_two_channel_customers_by_state AS
WITH both_channels AS (
  SELECT ss_customer_sk AS cust FROM store_sales
  INTERSECT
  SELECT ws_bill_customer_sk FROM web_sales)
SELECT c_state, COUNT(*) AS customers
FROM both_channels JOIN customer ON cust = c_customer_sk
GROUP BY c_state;

CREATE MATERIALIZED VIEW cte_promo_lift AS
WITH promo AS (
  SELECT i_category, SUM(ss_ext_sales_price) AS promo_revenue
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk
  WHERE ss_promo_sk IS NOT NULL GROUP BY i_category),
no_promo AS (
  SELECT i_category, SUM(ss_ext_sales_price) AS base_revenue
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk
  WHERE ss_promo_sk IS NULL GROUP BY i_category)
SELECT COALESCE(p.i_category, n.i_category) AS category, promo_revenue, base_revenue,
  promo_revenue / NULLIF(base_revenue, 0) AS promo_to_base
FROM promo p FULL OUTER JOIN no_promo n ON p.i_category = n.i_category;

CREATE MATERIALIZED VIEW cte_category_pairs_in_basket AS
WITH lines AS (
  SELECT ss_ticket_number AS ticket, i_category AS category
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk)
SELECT a.category AS category_a, b.category AS category_b, COUNT(DISTINCT a.ticket) AS tickets
FROM lines a JOIN lines b ON a.ticket = b.ticket AND a.category < b.category
GROUP BY a.category, b.category;

CREATE MATERIALIZED VIEW cte_rfm_segments AS
WITH rfm AS (
  SELECT ss_customer_sk AS cust, MAX(d_date) AS last_date,
    COUNT(DISTINCT ss_ticket_number) AS frequency, SUM(ss_ext_sales_price) AS monetary
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  WHERE ss_customer_sk IS NOT NULL
  GROUP BY ss_customer_sk),
scored AS (
  SELECT cust,
    NTILE(3) OVER (ORDER BY last_date, cust) AS r_score,
    NTILE(3) OVER (ORDER BY frequency, cust) AS f_score,
    NTILE(3) OVER (ORDER BY monetary, cust) AS m_score
  FROM rfm)
SELECT r_score, f_score, m_score, COUNT(*) AS customers
FROM scored
GROUP BY r_score, f_score, m_score;

CREATE MATERIALIZED VIEW cte_store_rank_in_market AS
WITH store_revenue AS (
  SELECT s_market_id, s_store_name, SUM(ss_ext_sales_price) AS revenue
  FROM store_sales JOIN store ON ss_store_sk = s_store_sk
  GROUP BY s_market_id, s_store_name)
SELECT s_market_id, s_store_name, revenue,
  DENSE_RANK() OVER (PARTITION BY s_market_id ORDER BY revenue DESC) AS market_rank,
  revenue / SUM(revenue) OVER (PARTITION BY s_market_id) AS market_share
FROM store_revenue;

CREATE MATERIALIZED VIEW cte_quarter_over_quarter AS
WITH q AS (
  SELECT d_year * 4 + d_qoy AS quarter_index, d_year, d_qoy, SUM(cs_net_profit) AS profit
  FROM catalog_sales JOIN date_dim ON cs_sold_date_sk = d_date_sk
  GROUP BY d_year, d_qoy),
growth AS (
  SELECT cur.d_year, cur.d_qoy, cur.profit, prev.profit AS prev_profit,
    cur.profit - prev.profit AS delta
  FROM q cur JOIN q prev ON cur.quarter_index = prev.quarter_index + 1)
SELECT d_year AS growth_year, d_qoy AS growth_quarter, profit, prev_profit, delta
FROM growth
WHERE delta > 0;

CREATE MATERIALIZED VIEW cte_top_brand_per_category AS
WITH brand_revenue AS (
  SELECT i_category, i_brand, SUM(ws_ext_sales_price) AS revenue
  FROM web_sales JOIN item ON ws_item_sk = i_item_sk
  GROUP BY i_category, i_brand),
best AS (
  SELECT i_category AS category, MAX(revenue) AS max_revenue
  FROM brand_revenue GROUP BY i_category)
SELECT i_category, i_brand, revenue
FROM brand_revenue JOIN best ON i_category = category AND revenue = max_revenue;

CREATE MATERIALIZED VIEW cte_item_return_rate AS
WITH sold AS (
  SELECT ss_item_sk AS item_sk, SUM(ss_quantity) AS qty_sold
  FROM store_sales GROUP BY ss_item_sk),
returned AS (
  SELECT sr_item_sk AS item_sk, SUM(sr_return_quantity) AS qty_returned
  FROM store_returns GROUP BY sr_item_sk)
SELECT i_item_id, i_category, qty_sold, COALESCE(qty_returned, 0) AS qty_returned,
  COALESCE(qty_returned, 0) / qty_sold AS return_rate
FROM sold
JOIN item ON sold.item_sk = i_item_sk
LEFT JOIN returned ON sold.item_sk = returned.item_sk;

CREATE MATERIALIZED VIEW cte_cross_channel_brand_classes AS
WITH cross_items AS (
  SELECT i_item_sk AS ss_item_sk
  FROM item,
    (SELECT iss.i_brand AS brand_id, iss.i_class AS class_id, iss.i_category AS category_id
     FROM store_sales JOIN item iss ON ss_item_sk = iss.i_item_sk
     INTERSECT
     SELECT ics.i_brand, ics.i_class, ics.i_category
     FROM catalog_sales JOIN item ics ON cs_item_sk = ics.i_item_sk
     INTERSECT
     SELECT iws.i_brand, iws.i_class, iws.i_category
     FROM web_sales JOIN item iws ON ws_item_sk = iws.i_item_sk) x
  WHERE i_brand = brand_id AND i_class = class_id AND i_category = category_id),
avg_sales AS (
  SELECT AVG(quantity * list_price) AS average_sales
  FROM (SELECT ss_quantity AS quantity, ss_sales_price AS list_price FROM store_sales
        UNION ALL
        SELECT cs_quantity, cs_sales_price FROM catalog_sales
        UNION ALL
        SELECT ws_quantity, ws_sales_price FROM web_sales) x)
SELECT 'store' AS channel, i_brand, i_class, i_category,
  SUM(ss_quantity * ss_sales_price) AS sales, COUNT(*) AS number_sales
FROM store_sales JOIN item ON ss_item_sk = i_item_sk
WHERE ss_item_sk IN (SELECT ss_item_sk FROM cross_items)
GROUP BY i_brand, i_class, i_category
HAVING SUM(ss_quantity * ss_sales_price) > (SELECT average_sales FROM avg_sales);

CREATE MATERIALIZED VIEW cte_first_channel AS
WITH purchases AS (
  SELECT ss_customer_sk AS cust, ss_sold_date_sk AS date_sk, 'store' AS channel
  FROM store_sales WHERE ss_customer_sk IS NOT NULL
  UNION ALL
  SELECT cs_bill_customer_sk, cs_sold_date_sk, 'catalog'
  FROM catalog_sales WHERE cs_bill_customer_sk IS NOT NULL
  UNION ALL
  SELECT ws_bill_customer_sk, ws_sold_date_sk, 'web'
  FROM web_sales WHERE ws_bill_customer_sk IS NOT NULL),
ordered AS (
  SELECT cust, channel,
    ROW_NUMBER() OVER (PARTITION BY cust ORDER BY date_sk, channel) AS rn
  FROM purchases)
SELECT channel AS first_channel, COUNT(*) AS customers
FROM ordered
WHERE rn = 1
GROUP BY channel;

CREATE MATERIALIZED VIEW cte_state_channel_pivot AS
WITH by_state AS (
  SELECT c_state AS state, 'store' AS ch, SUM(ss_ext_sales_price) AS revenue
  FROM store_sales JOIN customer ON ss_customer_sk = c_customer_sk GROUP BY c_state
  UNION ALL
  SELECT c_state, 'catalog', SUM(cs_ext_sales_price)
  FROM catalog_sales JOIN customer ON cs_bill_customer_sk = c_customer_sk GROUP BY c_state
  UNION ALL
  SELECT c_state, 'web', SUM(ws_ext_sales_price)
  FROM web_sales JOIN customer ON ws_bill_customer_sk = c_customer_sk GROUP BY c_state)
SELECT state,
  SUM(CASE WHEN ch = 'store' THEN revenue END) AS store_revenue,
  SUM(CASE WHEN ch = 'catalog' THEN revenue END) AS catalog_revenue,
  SUM(CASE WHEN ch = 'web' THEN revenue END) AS web_revenue,
  SUM(revenue) AS total_revenue
FROM by_state
GROUP BY state;

CREATE MATERIALIZED VIEW cte_three_level_report AS
WITH lines AS (
  SELECT ss_store_sk, ss_item_sk, ss_ext_sales_price, ss_net_profit
  FROM store_sales WHERE ss_quantity > 10),
per_item AS (
  SELECT ss_store_sk, ss_item_sk, SUM(ss_ext_sales_price) AS revenue,
    SUM(ss_net_profit) AS profit
  FROM lines GROUP BY ss_store_sk, ss_item_sk),
per_store AS (
  SELECT ss_store_sk, COUNT(*) AS items, SUM(revenue) AS revenue, SUM(profit) AS profit,
    SUM(CASE WHEN profit < 0 THEN 1 ELSE 0 END) AS losing_items
  FROM per_item GROUP BY ss_store_sk)
SELECT s_store_name, items, revenue, profit, losing_items
FROM per_store JOIN store ON ss_store_sk = s_store_sk;

CREATE MATERIALIZED VIEW cte_item_rank_change_yoy AS
WITH r AS (
  SELECT d_year, ss_item_sk,
    RANK() OVER (PARTITION BY d_year ORDER BY SUM(ss_ext_sales_price) DESC) AS rk
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  GROUP BY d_year, ss_item_sk)
SELECT cur.ss_item_sk AS item_sk, cur.d_year AS rank_year, cur.rk AS rank_now,
  prev.rk AS rank_before, prev.rk - cur.rk AS climbed
FROM r cur
JOIN r prev ON cur.ss_item_sk = prev.ss_item_sk AND cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW cte_single_store_loyalists AS
WITH loyal AS (
  SELECT ss_customer_sk AS cust FROM store_sales
  WHERE ss_customer_sk IS NOT NULL
  GROUP BY ss_customer_sk
  HAVING COUNT(DISTINCT ss_store_sk) = 1)
SELECT c_state, COUNT(*) AS loyal_customers
FROM customer
WHERE EXISTS (SELECT 1 FROM loyal WHERE cust = c_customer_sk)
GROUP BY c_state;

CREATE MATERIALIZED VIEW cte_price_outliers AS
WITH stats AS (
  SELECT i_category AS category, AVG(ss_sales_price) AS mu,
    STDDEV_SAMP(ss_sales_price) AS sigma
  FROM store_sales JOIN item ON ss_item_sk = i_item_sk
  GROUP BY i_category)
SELECT ss_ticket_number, ss_item_sk, i_category, ss_sales_price,
  ROUND((ss_sales_price - mu) / sigma, 3) AS z_score
FROM store_sales
JOIN item ON ss_item_sk = i_item_sk
JOIN stats ON i_category = category
WHERE sigma > 0 AND ss_sales_price > mu + 2 * sigma;

CREATE MATERIALIZED VIEW cte_catalog_web_yoy_by_category AS
WITH cat AS (
  SELECT i_category, d_year, SUM(cs_ext_sales_price) AS revenue
  FROM catalog_sales JOIN item ON cs_item_sk = i_item_sk
  JOIN date_dim ON cs_sold_date_sk = d_date_sk
  GROUP BY i_category, d_year),
web AS (
  SELECT i_category, d_year, SUM(ws_ext_sales_price) AS revenue
  FROM web_sales JOIN item ON ws_item_sk = i_item_sk
  JOIN date_dim ON ws_sold_date_sk = d_date_sk
  GROUP BY i_category, d_year)
SELECT c2.i_category AS category, c2.d_year AS sales_year,
  c2.revenue / NULLIF(c1.revenue, 0) AS catalog_growth,
  w2.revenue / NULLIF(w1.revenue, 0) AS web_growth
FROM cat c1
JOIN cat c2 ON c1.i_category = c2.i_category AND c2.d_year = c1.d_year + 1
JOIN web w1 ON w1.i_category = c1.i_category AND w1.d_year = c1.d_year
JOIN web w2 ON w2.i_category = c2.i_category AND w2.d_year = c2.d_year;

CREATE MATERIALIZED VIEW cte_brand_distinct_buyers_rollup AS
WITH brand_lines AS (
  SELECT i_category, i_brand, ws_bill_customer_sk AS buyer, ws_ext_sales_price AS amount
  FROM web_sales JOIN item ON ws_item_sk = i_item_sk)
SELECT i_category, i_brand, COUNT(DISTINCT buyer) AS buyers, SUM(amount) AS revenue,
  GROUPING(i_brand) AS g_brand
FROM brand_lines
GROUP BY ROLLUP (i_category, i_brand);

CREATE MATERIALIZED VIEW cte_customer_two_year_retention AS
WITH yearly AS (
  SELECT ws_bill_customer_sk AS cust, d_year
  FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
  WHERE ws_bill_customer_sk IS NOT NULL
  GROUP BY ws_bill_customer_sk, d_year)
SELECT a.d_year AS cohort_year, COUNT(*) AS cohort,
  COUNT(b.cust) AS retained_next_year
FROM yearly a
LEFT JOIN yearly b ON a.cust = b.cust AND b.d_year = a.d_year + 1
GROUP BY a.d_year;

CREATE MATERIALIZED VIEW cte_union_distinct_items_by_brand AS
WITH sold_items AS (
  SELECT ss_item_sk AS item_sk FROM store_sales
  UNION
  SELECT cs_item_sk FROM catalog_sales
  UNION
  SELECT ws_item_sk FROM web_sales)
SELECT i_brand, COUNT(*) AS items_sold, MAX(i_current_price) AS top_price
FROM sold_items JOIN item ON item_sk = i_item_sk
GROUP BY i_brand;

CREATE MATERIALIZED VIEW cte_returns_vs_sales_yoy AS
WITH sales AS (
  SELECT d_year, SUM(ss_ext_sales_price) AS sold
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk GROUP BY d_year),
returns AS (
  SELECT d_year, SUM(sr_return_amt) AS returned
  FROM store_returns JOIN date_dim ON sr_returned_date_sk = d_date_sk GROUP BY d_year),
combined AS (
  SELECT sales.d_year, sold, returned, returned / NULLIF(sold, 0) AS return_ratio
  FROM sales JOIN returns ON sales.d_year = returns.d_year)
SELECT cur.d_year AS ratio_year, cur.return_ratio, prev.return_ratio AS prev_return_ratio,
  cur.return_ratio - prev.return_ratio AS ratio_change
FROM combined cur JOIN combined prev ON cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW cte_window_sum_per_partition AS
WITH item_year AS (
  SELECT i_category, i_item_sk, d_year, SUM(cs_quantity) AS units
  FROM catalog_sales JOIN item ON cs_item_sk = i_item_sk
  JOIN date_dim ON cs_sold_date_sk = d_date_sk
  GROUP BY i_category, i_item_sk, d_year)
SELECT i_category, i_item_sk, d_year, units,
  SUM(units) OVER (PARTITION BY i_category, d_year) AS category_units,
  AVG(units) OVER (PARTITION BY i_category, d_year) AS category_avg_units
FROM item_year;

CREATE MATERIALIZED VIEW cte_intersect_except_items AS
WITH store_2022 AS (
  SELECT ss_item_sk AS item_sk FROM store_sales
  JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2022),
store_2023 AS (
  SELECT ss_item_sk AS item_sk FROM store_sales
  JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2023),
kept AS (SELECT item_sk FROM store_2022 INTERSECT SELECT item_sk FROM store_2023),
dropped AS (SELECT item_sk FROM store_2022 EXCEPT SELECT item_sk FROM store_2023)
SELECT 'kept' AS status, COUNT(*) AS items FROM kept
UNION ALL
SELECT 'dropped' AS status, COUNT(*) AS items FROM dropped;

CREATE MATERIALIZED VIEW cte_exists_over_cte AS
WITH big_orders AS (
  SELECT cs_order_number, cs_bill_customer_sk, SUM(cs_ext_sales_price) AS order_total
  FROM catalog_sales GROUP BY cs_order_number, cs_bill_customer_sk
  HAVING SUM(cs_ext_sales_price) > 15000)
SELECT c_customer_id, c_state
FROM customer c
WHERE EXISTS (SELECT 1 FROM big_orders b WHERE b.cs_bill_customer_sk = c.c_customer_sk)
  AND NOT EXISTS (SELECT 1 FROM store_returns WHERE sr_customer_sk = c.c_customer_sk);

CREATE MATERIALIZED VIEW cte_ntile_price_bands AS
WITH priced AS (
  SELECT i_item_sk, i_category, i_current_price,
    NTILE(3) OVER (PARTITION BY i_category ORDER BY i_current_price, i_item_sk) AS price_tier
  FROM item)
SELECT i_category, price_tier, COUNT(*) AS lines, SUM(ws_ext_sales_price) AS revenue
FROM web_sales JOIN priced ON ws_item_sk = i_item_sk
GROUP BY i_category, price_tier;

-- ---------------------------------------------------------------------------------------
-- Views over views
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW state_revenue_growth AS
SELECT cur.s_state, cur.d_year AS growth_year, cur.revenue,
  cur.revenue - prev.revenue AS growth
FROM sales_by_year_state cur
JOIN sales_by_year_state prev ON cur.s_state = prev.s_state AND cur.d_year = prev.d_year + 1;

CREATE MATERIALIZED VIEW channel_share_by_year AS
SELECT channel, d_year, revenue,
  revenue / SUM(revenue) OVER (PARTITION BY d_year) AS channel_share
FROM channel_year_totals;

CREATE MATERIALIZED VIEW top_category_per_channel AS
SELECT channel, i_category, revenue
FROM (SELECT channel, i_category, revenue,
        RANK() OVER (PARTITION BY channel ORDER BY revenue DESC) AS rk
      FROM channel_category_revenue) ranked
WHERE rk = 1;

-- ---------------------------------------------------------------------------------------
-- Names Spark gives (issue 52): unaliased aggregates as TPC-DS's query 13 writes them, and
-- a spaced alias as in query 16; Delta's writer stores them with column mapping
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW store_averages_unaliased AS
SELECT ss_store_sk, avg(ss_quantity), avg(ss_ext_sales_price), sum(ss_net_profit), count(*)
FROM store_sales
GROUP BY ss_store_sk;

CREATE MATERIALIZED VIEW web_order_count_spaced AS
SELECT ws_warehouse_sk, count(DISTINCT ws_order_number) AS `order count`,
  sum(ws_net_profit) AS `total net profit`
FROM web_sales
GROUP BY ws_warehouse_sk;

-- ---------------------------------------------------------------------------------------
-- A correlation repeated in every branch of an OR, as TPC-DS's query 41 writes it (issue
-- 80): factored out, it keys the subquery by the manufacturer
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW brands_of_manufacturers_with_matching_lines AS
SELECT DISTINCT i_brand
FROM item i1
WHERE i_manufact_id BETWEEN 1 AND 40
  AND (SELECT count(*) AS lines
       FROM item
       WHERE (i_manufact_id = i1.i_manufact_id AND i_category = 'Women'
              AND (i_class = 'dresses' OR i_current_price < 20))
          OR (i_manufact_id = i1.i_manufact_id AND i_category = 'Men'
              AND (i_class = 'shirts' OR i_current_price > 80))) > 0;

-- ---------------------------------------------------------------------------------------
-- Two channels' running totals merged by a FULL JOIN, the key spelled out with CASE as
-- TPC-DS's query 51 writes it (issue 80): each row's merged item is its key
-- ---------------------------------------------------------------------------------------

CREATE MATERIALIZED VIEW items_where_web_leads_store AS
WITH web_running AS (
  SELECT ws_item_sk AS item_sk, d_date,
    sum(sum(ws_sales_price)) OVER (PARTITION BY ws_item_sk ORDER BY d_date
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
  FROM web_sales JOIN date_dim ON ws_sold_date_sk = d_date_sk
  WHERE d_year = 2023
  GROUP BY ws_item_sk, d_date),
store_running AS (
  SELECT ss_item_sk AS item_sk, d_date,
    sum(sum(ss_sales_price)) OVER (PARTITION BY ss_item_sk ORDER BY d_date
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
  FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
  WHERE d_year = 2023
  GROUP BY ss_item_sk, d_date)
SELECT * FROM (
  SELECT item_sk, d_date, web_total, store_total,
    max(web_total) OVER (PARTITION BY item_sk ORDER BY d_date
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS web_best,
    max(store_total) OVER (PARTITION BY item_sk ORDER BY d_date
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS store_best
  FROM (
    SELECT CASE WHEN web.item_sk IS NOT NULL THEN web.item_sk ELSE store.item_sk END AS item_sk,
      CASE WHEN web.d_date IS NOT NULL THEN web.d_date ELSE store.d_date END AS d_date,
      web.running AS web_total, store.running AS store_total
    FROM web_running web FULL OUTER JOIN store_running store
      ON web.item_sk = store.item_sk AND web.d_date = store.d_date) merged) bests
WHERE web_best > store_best;
